import { ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { monotonicMs, WATCHDOG_MARKER, WATCHDOG_PROGRAM } from './watchdog-program';

/**
 * The worker's side of its command watchdog (see watchdog-program.ts): starts the watchdog process
 * once, tells it each command's process group and deadline, and starts it again if it dies —
 * telling the new one every group still running with its deadline. It runs as the worker's user
 * (root in a worker that switches users), so it may kill commands of RUN_AS_USER. Deadlines travel
 * as instants of the machine's monotonic clock, never as durations: a watchdog that reads a line
 * late (still booting, short of CPU) must not move the deadline by its own delay.
 */
export class CommandWatchdog {
  private child?: ChildProcess;
  /** Every group being guarded, with its deadline on the machine's monotonic clock (ms). */
  private readonly deadlines = new Map<number, number>();
  /** How many watchdogs were started (1 + restarts). */
  starts = 0;

  /** Starts the watchdog ahead of the first command, so its boot is not on that command's path. */
  start(): this {
    this.ensure();
    return this;
  }

  /** Ends the watchdog (the worker is shutting down): it kills whatever it still guards and exits. */
  stop(): void {
    const child = this.child;
    this.child = undefined;
    this.deadlines.clear();
    child?.stdin?.end();
  }

  /**
   * Guards `pgid` until `until` (ms since the epoch). Resolves once the line is in the kernel's pipe
   * to the watchdog: from then on the group dies with the worker even if the worker dies before its
   * next instruction. Rejects when no watchdog could be told (the command must then not run).
   */
  async watch(pgid: number, until: number): Promise<void> {
    const deadline = Math.ceil(monotonicMs() + (until - Date.now()));
    this.deadlines.set(pgid, deadline);
    const line = `W ${pgid} ${deadline}\n`;
    const dead = this.child;
    try {
      await this.send(line);
    } catch {
      // It died before we saw its exit (EPIPE): start the next one now (it is told everything).
      if (this.child === dead) this.child = undefined;
      await this.send(line);
    }
  }

  /** A keep-alive: the worker is alive and still holds the run's lock. */
  keepAlive(pgid: number, until: number): void {
    if (!this.deadlines.has(pgid)) return;
    this.watch(pgid, until).catch(() => undefined);
  }

  /** The attempt is over: the watchdog kills whatever is left of the group and forgets it. */
  release(pgid: number): void {
    if (!this.deadlines.delete(pgid)) return;
    this.send(`X ${pgid}\n`).catch(() => undefined);
  }

  /** The watchdog's pid (tests find it from outside too, by its marker). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  private async send(line: string): Promise<void> {
    const stdin = this.ensure().stdin as Writable;
    return new Promise((resolve, reject) => {
      stdin.write(line, (err) => (err ? reject(err) : resolve()));
    });
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    this.starts++;
    // Its own session: a signal to the worker's process group (a terminal's ^C, a freeze of the
    // group) does not reach it. It must outlive the worker long enough to read the EOF.
    // No environment: it needs none, and the worker's holds onceflow's credentials.
    const child = spawn(process.execPath, ['--max-old-space-size=16', '-e', WATCHDOG_PROGRAM, WATCHDOG_MARKER], {
      detached: true,
      env: {},
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    this.child = child;
    const startedAt = performance.now();
    const gone = () => {
      if (this.child !== child) return;
      this.child = undefined;
      // Started again at once while commands run: each is guarded again within milliseconds. One
      // that dies as it starts (no memory, no pids) is retried after a second, not in a loop.
      if (this.deadlines.size > 0)
        setTimeout(() => this.ensure(), performance.now() - startedAt < 1000 ? 1000 : 0).unref();
    };
    child.once('error', gone);
    child.once('exit', gone);
    // EPIPE on a write after it died: the write's own callback reports it, and `gone` restarts it.
    child.stdin?.on('error', () => undefined);
    // A replacement learns every group still guarded before anything else is written to it, in this
    // same tick: whoever starts it (the restart timer, or a keep-alive that found no watchdog), a
    // worker frozen right after never leaves a running command unknown to it.
    for (const [pgid, deadline] of this.deadlines) child.stdin?.write(`W ${pgid} ${deadline}\n`, () => undefined);
    // The watchdog never keeps a worker alive that is otherwise done.
    child.unref();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    return child;
  }
}
