import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, WriteStream } from 'node:fs';
import { join } from 'node:path';
import { freePort, repoRoot, sleep } from './util';

export type Role = 'api' | 'worker' | 'scheduler' | 'all';

/**
 * One real onceflow process (compiled `dist/src/main.js`), its output appended to a log file so a
 * violation can be traced afterwards. Faults are signals: SIGKILL, SIGSTOP/SIGCONT.
 */
export class AppProcess {
  /** Every process started and not yet exited: killed if the chaos run itself is interrupted. */
  static readonly live = new Set<ChildProcess>();
  child!: ChildProcess;
  /** The pid of every start, in order. */
  readonly pids: number[] = [];
  port = 0;
  frozen = false;
  /** Answered /health/ready since its last start, and not killed since. */
  ready = false;
  private exited!: Promise<void>;
  private log!: WriteStream;
  private logClosed!: Promise<void>;

  constructor(
    readonly label: string,
    readonly role: Role,
    private readonly env: Record<string, string>,
    private readonly logFile: string,
    /** A fixed port (the demo's stable URL); otherwise a free one is picked at each start. */
    private readonly fixedPort?: number,
  ) {}

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Start and wait until ready. The port is picked free just before the spawn, so another process
   * (a worker's own API server, a command's outgoing connection) can take it in between: a start
   * that dies of EADDRINUSE is retried on a new port; so is any other early exit (a start-up that
   * lost a race with the load is not what chaos tests), printed with the end of the log, three
   * tries in all, so a CI transcript shows why.
   */
  async start(readyTimeoutMs = 45_000): Promise<this> {
    for (let attempt = 1; ; attempt++) {
      const logStart = existsSync(this.logFile) ? readFileSync(this.logFile).length : 0;
      try {
        return await this.startOnce(readyTimeoutMs);
      } catch (err) {
        if (!(err instanceof ExitedEarly)) throw err;
        await Promise.race([this.logClosed, sleep(5000)]);
        const tail = readFileSync(this.logFile).subarray(logStart).toString('utf8');
        const last = tail.trimEnd().split('\n').slice(-12).join('\n    ');
        const why = `${this.label} exited before it was ready (see ${this.logFile}); its log ends:\n    ${last}`;
        if (attempt >= 3 || (this.fixedPort !== undefined && /EADDRINUSE/.test(tail))) throw new Error(why);
        // A start is not what chaos tests: say it, and start again (3 tries).
        process.stdout.write(`  [note] start ${attempt} of ${this.label} failed, starting again: ${why}\n`);
      }
    }
  }

  private async startOnce(readyTimeoutMs: number): Promise<this> {
    const main = join(repoRoot(), 'dist/src/main.js');
    if (!existsSync(main)) throw new Error('dist/src/main.js is missing: build first (npm run chaos does)');
    this.port = this.fixedPort ?? (await freePort());
    this.log = createWriteStream(this.logFile, { flags: 'a' });
    const stream = this.log;
    this.logClosed = new Promise((resolve) => stream.once('close', () => resolve()).once('error', () => resolve()));
    this.log.write(`--- ${new Date().toISOString()} start ${this.label} (${this.role}) on :${this.port}\n`);
    this.child = spawn(process.execPath, [main], {
      env: { ...process.env, ...this.env, APP_ROLE: this.role, PORT: String(this.port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.frozen = false;
    this.ready = false;
    if (this.child.pid) this.pids.push(this.child.pid);
    AppProcess.live.add(this.child);
    const log = this.log;
    this.child.stdout!.on('data', (c) => log.write(c));
    this.child.stderr!.on('data', (c) => log.write(c));
    const child = this.child;
    this.exited = new Promise((resolve) =>
      child.once('exit', () => {
        AppProcess.live.delete(child);
        resolve();
      }),
    );
    // 'close' comes after the last output: only then is the log complete.
    child.once('close', (code, signal) =>
      log.end(`--- ${new Date().toISOString()} exit ${this.label} code=${code} signal=${signal}\n`),
    );
    // Ready = /health/ready answers 200; an exit before that fails at once, not at the timeout.
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      if (!this.running) throw new ExitedEarly();
      const res = await fetch(`${this.url}/health/ready`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
      if (res?.status === 200) break;
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`${this.label} not ready after ${readyTimeoutMs} ms (see ${this.logFile})`);
      }
      await sleep(200);
    }
    this.ready = true;
    return this;
  }

  /** kill -9, and wait until the kernel says it is gone. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.ready = false;
    this.child.kill('SIGKILL');
    this.frozen = false;
    await this.exited;
  }

  freeze(): void {
    if (this.running) {
      this.child.kill('SIGSTOP');
      this.frozen = true;
    }
  }

  thaw(): void {
    if (this.running) this.child.kill('SIGCONT');
    this.frozen = false;
  }

  /** SIGTERM (the graceful path), SIGKILL if it has not gone after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.running) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
      clearTimeout(timer);
      if (this.running) await this.kill();
    }
  }
}

class ExitedEarly extends Error {}
