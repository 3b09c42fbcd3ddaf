import { ChildProcess, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { COMMAND_HOST_MARKER, COMMAND_HOST_PROGRAM, monotonicMs } from './command-host-program';

export interface HostSpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  uid?: number;
  gid?: number;
  /** Until when (ms since the epoch) the command may run without a keep-alive. */
  until: number;
}

export interface CommandExit {
  code: number | null;
  sig: string | null;
  /** It never ran: spawn failed (ENOENT, EPERM, E2BIG, …). */
  startError?: string;
}

/** One forked command, as the worker sees it. */
export interface SpawnedCommand {
  /** Its pid (its process group), or undefined when it never started. */
  readonly pid: Promise<number | undefined>;
  /** How it ended. */
  readonly exited: Promise<CommandExit>;
  /** The last bytes it wrote to stdout and stderr, once both closed (at most a second after its exit). */
  readonly output: Promise<Buffer>;
}

interface Pending {
  pid: (pid: number | undefined) => void;
  exited: (e: CommandExit) => void;
  output: (tail: Buffer) => void;
  pgid?: number;
  ended: boolean;
}

type HostMessage =
  | { t: 'pid'; id: number; pid: number }
  | { t: 'exit'; id: number; code: number | null; sig: string | null; startError?: string }
  | { t: 'closed'; id: number; tail: string };

/**
 * The worker's side of its command host (command-host-program.ts): one small process, started
 * once, forks every command and guards it — killed when the worker dies (EOF on the host's
 * stdin) or stops sending keep-alives past its deadline (the worker is frozen). It runs as the
 * worker's user (root in a worker that switches users), so it may start and kill commands of
 * RUN_AS_USER, and with an empty environment: the worker's holds onceflow's credentials.
 *
 * If the host itself dies, nobody reads its commands' ends any more: the worker kills each group
 * it knows and reports the command killed (another attempt may run it); a command the worker had
 * not heard of yet was still behind its gate, whose pipe died with the host, so it never ran. The
 * next spawn starts a new host.
 */
export class CommandHost {
  private child?: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  /** Groups the host guards, by pgid: keep-alives are sent only for these. */
  private readonly guarded = new Set<number>();
  private seq = 0;
  /** How many hosts were started (1 + restarts). */
  starts = 0;

  constructor(private readonly tailBytes: number) {}

  /** Starts the host ahead of the first command, so its boot is not on that command's path. */
  start(): this {
    this.ensure();
    return this;
  }

  /** Ends the host (the worker is shutting down): it kills whatever it still guards and exits. */
  stop(): void {
    const child = this.child;
    this.child = undefined;
    child?.stdin?.end();
  }

  /** The host's pid (tests find it from outside too, by its name). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  spawn(req: HostSpawnRequest): SpawnedCommand {
    const id = this.seq++;
    let pending!: Pending;
    const pid = new Promise<number | undefined>((resolvePid) => {
      pending = { pid: resolvePid, exited: () => undefined, output: () => undefined, ended: false };
    });
    const exited = new Promise<CommandExit>((resolve) => (pending.exited = resolve));
    const output = new Promise<Buffer>((resolve) => (pending.output = resolve));
    this.pending.set(id, pending);
    const host = this.ensure();
    const { until, ...spawnOptions } = req;
    this.send(host, { t: 'spawn', id, at: this.deadline(until), ...spawnOptions });
    return { pid, exited, output };
  }

  /** A keep-alive: the worker is alive and still holds the run's lock. */
  keepAlive(pgid: number, until: number): void {
    if (this.guarded.has(pgid) && this.child) this.send(this.child, { t: 'watch', pgid, at: this.deadline(until) });
  }

  /** The attempt is over: the host kills whatever is left of the group and forgets it. */
  release(pgid: number): void {
    if (!this.guarded.delete(pgid)) return;
    if (this.child) this.send(this.child, { t: 'release', pgid });
  }

  /** A deadline travels as an instant of the monotonic clock: a host that reads it late does not move it. */
  private deadline(until: number): number {
    return Math.ceil(monotonicMs() + (until - Date.now()));
  }

  /** A write to a host that died meanwhile fails quietly: its `close` settles every command it had. */
  private send(host: ChildProcess, message: object): void {
    (host.stdin as Writable).write(`${JSON.stringify(message)}\n`, () => undefined);
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    this.starts++;
    // Its own session: a signal to the worker's process group (a terminal's ^C, a freeze of the
    // group) does not reach it. It must outlive the worker long enough to read the EOF.
    // One V8 helper thread, not four: every fork copies the host's mappings and write-protects its
    // pages under all its threads, and its work is a few JSON lines per command (bench/
    // executor-alone.ts: ~1.6 → ~1.4 ms of host CPU per command).
    const child = spawn(
      process.execPath,
      [
        '--max-old-space-size=32',
        '--v8-pool-size=1',
        '-e',
        COMMAND_HOST_PROGRAM,
        COMMAND_HOST_MARKER,
        String(this.tailBytes),
      ],
      { detached: true, env: {}, stdio: ['pipe', 'ignore', 'ignore', 'pipe'] },
    );
    this.child = child;
    child.stdin?.on('error', () => undefined);
    const answers = child.stdio[3] as Readable;
    let buffered = '';
    answers.setEncoding('utf8');
    answers.on('data', (chunk: string) => {
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        this.onMessage(JSON.parse(line) as HostMessage);
      }
    });
    answers.on('error', () => undefined);
    let gone = false;
    const lost = () => {
      if (gone) return;
      gone = true;
      if (this.child === child) this.child = undefined;
      this.settleAll();
    };
    // `close` comes after every answer it wrote was read (its pipe closed) and it exited.
    child.once('close', lost);
    child.once('error', lost);
    // The host never keeps a worker alive that is otherwise done.
    child.unref();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    (answers as unknown as { unref?: () => void }).unref?.();
    return child;
  }

  private onMessage(m: HostMessage): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.t === 'pid') {
      p.pgid = m.pid;
      this.guarded.add(m.pid);
      p.pid(m.pid);
    } else if (m.t === 'exit') {
      p.ended = true;
      if (p.pgid === undefined) p.pid(undefined);
      p.exited({ code: m.code, sig: m.sig, ...(m.startError !== undefined ? { startError: m.startError } : {}) });
    } else {
      this.pending.delete(m.id);
      p.output(Buffer.from(m.tail, 'base64'));
    }
  }

  /**
   * The host died (it should not: an out-of-memory, a kill from outside): its commands lost the
   * process that reads their ends. Each known group is killed and its command ends as killed;
   * one the host had not announced never passed its gate (the gate's pipe died with the host).
   */
  private settleAll(): void {
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      if (p.pgid !== undefined) {
        this.guarded.delete(p.pgid);
        killGroup(p.pgid);
      }
      if (p.ended) {
        p.output(Buffer.alloc(0));
        continue;
      }
      if (p.pgid === undefined) p.pid(undefined);
      p.exited({ code: null, sig: 'SIGKILL' });
      p.output(Buffer.from('[onceflow] the process that forked the command died; the command was killed\n'));
    }
  }
}

export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    /* already gone, or not ours to signal */
  }
}
