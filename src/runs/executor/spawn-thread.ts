import type { SpawnOptions } from 'node:child_process';
import { Worker } from 'node:worker_threads';

/**
 * The program of the spawn thread (plain JavaScript, run with `eval`, so it needs nothing the build
 * or the tests transform). It forks each command and reports on it:
 *   in:  {t: 'spawn', id, file, args, options}   fork it (stdin, stdout, stderr piped)
 *        {t: 'go', id}                           write the gate's line and close its stdin
 *   out: {t: 'pid', id, pid}                     it exists
 *        {t: 'exit', id, code, sig, startError?} it exited (or never started)
 *        {t: 'closed', id, tail}                 its output closed, or a second passed since its
 *                                                exit: the last `tailBytes` bytes it wrote
 */
const PROGRAM = `'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const LIMIT = workerData.tailBytes;
const children = new Map();
const post = (m) => parentPort.postMessage(m);
parentPort.on('message', (m) => {
  if (m.t === 'spawn') start(m);
  else if (m.t === 'go') {
    const child = children.get(m.id);
    if (child && child.stdin) child.stdin.end('go\\n');
  }
});
// The chunks kept can hold more than LIMIT bytes (one read can bring 64 KB): cut to the last LIMIT,
// copied, so the message carries only those and not the pool the Buffer was cut from.
function last(all) {
  return new Uint8Array(all.subarray(Math.max(0, all.length - LIMIT)));
}
function start(m) {
  const chunks = [];
  let size = 0;
  const push = (c) => {
    chunks.push(c);
    size += c.length;
    while (size - chunks[0].length >= LIMIT) size -= chunks.shift().length;
  };
  let child;
  try {
    child = spawn(m.file, m.args, m.options);
  } catch (err) {
    post({ t: 'exit', id: m.id, code: null, sig: null, startError: String(err && err.message) });
    post({ t: 'closed', id: m.id, tail: new Uint8Array(0) });
    return;
  }
  children.set(m.id, child);
  if (child.stdin) child.stdin.on('error', () => undefined);
  if (child.stdout) child.stdout.on('data', push);
  if (child.stderr) child.stderr.on('data', push);
  if (child.pid !== undefined) post({ t: 'pid', id: m.id, pid: child.pid });
  let exited = false;
  const exit = (r) => {
    if (exited) return;
    exited = true;
    post(Object.assign({ t: 'exit', id: m.id }, r));
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      children.delete(m.id);
      post({ t: 'closed', id: m.id, tail: last(Buffer.concat(chunks)) });
    };
    const timer = setTimeout(close, 1000);
    if (child.stdout && child.stdout.destroyed && child.stderr && child.stderr.destroyed) close();
    else child.once('close', close);
  };
  child.once('error', (err) => exit({ code: null, sig: null, startError: String(err && err.message) }));
  child.once('exit', (code, sig) => exit({ code, sig }));
}
`;

export interface CommandExit {
  code: number | null;
  sig: string | null;
  /** It never ran: spawn failed (ENOENT, EPERM, E2BIG, …). */
  startError?: string;
}

/** One forked command, as the worker's main thread sees it. */
export interface SpawnedCommand {
  /** Its pid (its process group: it is spawned detached), or undefined when it never started. */
  readonly pid: Promise<number | undefined>;
  /** How it ended. */
  readonly exited: Promise<CommandExit>;
  /** The last bytes it wrote to stdout and stderr, once both closed (at most a second after its exit). */
  readonly output: Promise<Buffer>;
  /** Opens the gate: writes `go` to its stdin and closes it. */
  go(): void;
}

interface Pending {
  pid: (pid: number | undefined) => void;
  exited: (e: CommandExit) => void;
  output: (tail: Buffer) => void;
  started: boolean;
  ended: boolean;
  pgid?: number;
}

/**
 * Forks the run's commands on a thread of the worker, not on its event loop. libuv forks
 * synchronously and waits for the child's exec; in a worker process of ~150 MB that took about
 * 40 % of the event loop in the full-path bench (copying page tables grows with the parent's
 * memory). On this thread the loop goes on claiming and finalizing other runs meanwhile. The
 * command is still a child of the worker process, so everything that relies on that holds: the
 * watchdog, the gate's pipe closing when the worker dies, the process tree the tests read.
 * One per process: it serves every executor of the process.
 */
export class SpawnThread {
  private worker?: Worker;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;

  constructor(private readonly tailBytes: number) {}

  spawn(file: string, args: string[], options: SpawnOptions): SpawnedCommand {
    const id = this.seq++;
    let pending!: Pending;
    const pid = new Promise<number | undefined>((resolvePid) => {
      pending = { pid: resolvePid, exited: () => undefined, output: () => undefined, started: false, ended: false };
    });
    const exited = new Promise<CommandExit>((resolve) => (pending.exited = resolve));
    const output = new Promise<Buffer>((resolve) => (pending.output = resolve));
    this.pending.set(id, pending);
    const worker = this.ensure();
    worker.postMessage({ t: 'spawn', id, file, args, options });
    return { pid, exited, output, go: () => worker.postMessage({ t: 'go', id }) };
  }

  /** Ends the thread (the worker is shutting down; its commands were handed over or killed). */
  stop(): void {
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
  }

  private ensure(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(PROGRAM, {
      eval: true,
      workerData: { tailBytes: this.tailBytes },
      // It holds a few small buffers per command: a small heap is plenty.
      resourceLimits: { maxOldGenerationSizeMb: 64 },
      // Nothing of the worker's environment: each command gets its own, in its spawn options.
      env: {},
      stdout: false,
      stderr: false,
    });
    worker.on('message', (m: Message) => this.onMessage(m));
    worker.once('error', () => this.lost(worker));
    worker.once('exit', () => this.lost(worker));
    // The thread never keeps a worker process alive that is otherwise done.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private onMessage(m: Message): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.t === 'pid') {
      p.started = true;
      p.pgid = m.pid;
      p.pid(m.pid);
    } else if (m.t === 'exit') {
      p.ended = true;
      if (!p.started) p.pid(undefined);
      p.exited({ code: m.code, sig: m.sig, ...(m.startError !== undefined ? { startError: m.startError } : {}) });
    } else if (m.t === 'closed') {
      this.pending.delete(m.id);
      p.output(Buffer.from(m.tail.buffer, m.tail.byteOffset, m.tail.byteLength));
    }
  }

  /**
   * The thread died (it should not: an out-of-memory, a bug): its commands lose their pipes and
   * nobody would see them end. Each is killed and ends as killed (another attempt may run it);
   * one not yet forked never starts. The next spawn starts a new thread.
   */
  private lost(worker: Worker): void {
    if (this.worker === worker) this.worker = undefined;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      if (p.ended) p.output(Buffer.alloc(0));
      else if (p.pgid !== undefined) {
        try {
          process.kill(-p.pgid, 'SIGKILL');
        } catch {
          /* already gone */
        }
        p.exited({ code: null, sig: 'SIGKILL' });
        p.output(Buffer.from('[onceflow] the thread that forked the command died; the command was killed\n'));
      } else {
        p.pid(undefined);
        p.exited({ code: null, sig: null, startError: 'the thread that forks commands died' });
        p.output(Buffer.alloc(0));
      }
    }
  }
}

type Message =
  | { t: 'pid'; id: number; pid: number }
  | { t: 'exit'; id: number; code: number | null; sig: string | null; startError?: string }
  | { t: 'closed'; id: number; tail: Uint8Array };
