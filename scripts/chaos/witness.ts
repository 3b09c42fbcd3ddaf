import { ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { isAlive } from './util';

/** start, done, transient, fail today; any other kind (a step's lines) is kept with its execution. */
export type LineKind = string;
/** The lines that end an execution: the command's own outcome. */
export const END_KINDS = ['done', 'transient', 'fail'];
/** The outcomes that finish a run: a second one of these is a run completed twice. */
export const COMPLETION_KINDS = ['done', 'fail'];

export interface ExecLine {
  kind: LineKind;
  runId: string;
  attempt: number;
  token: number;
  pid: number;
  /** Wall clock of the line, in ms (the orchestrator writes ns). */
  atMs: number;
  /** The `key=value` fields after the six positional ones (ppid, worker, lock, …). */
  fields: Record<string, string>;
}

/**
 * One execution of a run: its start line, its end line if it wrote one, and what the witness saw.
 * A killed execution has no end line; it ended somewhere in [lastSeenAlive, deadBy].
 */
export interface Execution {
  start: ExecLine;
  end?: ExecLine;
  /** Lines of other kinds written by this execution, in order. */
  other: ExecLine[];
  /** The worker that spawned it, as the command found it in /proc at its start: 0 = none (orphan), undefined = not recorded. */
  worker?: number;
  /** Last time the command was seen alive (ms): a lower bound of its end. */
  lastSeenAlive: number;
  /** When the poll first saw it dead (ms), if it did: an upper bound of its end. */
  seenDeadAt?: number;
  /** When a waiter got the command's flock (ms): it had exited by then, children included. */
  lockFreedAt?: number;
}

export function parseLine(line: string): ExecLine | null {
  const [kind, runId, attempt, token, pid, at, ...rest] = line.trim().split(' ');
  if (!kind || !/^[a-z][a-z-]*$/.test(kind) || !at || !/^\d+$/.test(at)) return null;
  const fields: Record<string, string> = {};
  for (const kv of rest) {
    const eq = kv.indexOf('=');
    if (eq > 0) fields[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return {
    kind,
    runId,
    attempt: Number(attempt),
    token: Number(token),
    pid: Number(pid),
    atMs: Number(BigInt(at) / 1_000_000n),
    fields,
  };
}

/** The latest moment an execution can have ended: its end line, else the first proof of death (undefined: none). */
export function deadBy(e: Execution): number | undefined {
  if (e.end) return e.end.atMs;
  const bounds = [e.seenDeadAt, e.lockFreedAt].filter((x): x is number => x !== undefined);
  return bounds.length ? Math.min(...bounds) : undefined;
}

/** The earliest moment an execution can have ended: its end line, else the last time it was seen alive. */
export function aliveUntil(e: Execution): number {
  return e.end ? e.end.atMs : e.lastSeenAlive;
}

/**
 * The outside witness. The fake orchestrator appends start/end lines to a file; this follows the
 * file and bounds the life of every command that has not written its end line from both sides:
 * a poll every `everyMs` (alive → lower bound), and a waiter blocked on the command's flock, which
 * it gets the moment the command and its children are gone (upper bound, a few ms late at most).
 * So a killed command's end is known within milliseconds, not within a poll period.
 */
export class Witness {
  readonly executions: Execution[] = [];
  private readonly open = new Map<string, Execution>();
  private readonly waiters = new Set<ChildProcess>();
  private offset = 0;
  private partial = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly file: string) {}

  start(everyMs = 25): this {
    this.timer = setInterval(() => this.poll(), everyMs);
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.poll();
    for (const w of this.waiters) w.kill('SIGKILL');
  }

  lines(): ExecLine[] {
    return this.executions.flatMap((e) => [e.start, ...e.other, ...(e.end ? [e.end] : [])]);
  }

  count(kind: LineKind, runId?: string): number {
    return this.executions.filter(
      (e) => (kind === 'start' ? true : e.end?.kind === kind) && (!runId || e.start.runId === runId),
    ).length;
  }

  /** Commands that started and are still alive (a killed worker's command must die with it). */
  alive(): Execution[] {
    return [...this.open.values()].filter((e) => deadBy(e) === undefined);
  }

  /** Commands of `worker` alive right now (read the file and the OS first). */
  liveOf(worker: number): Execution[] {
    this.poll();
    return this.alive().filter((e) => e.worker === worker && isAlive(e.start.pid));
  }

  poll(): void {
    this.readNew();
    const now = Date.now();
    for (const e of this.open.values()) {
      if (e.seenDeadAt !== undefined) continue;
      if (isAlive(e.start.pid)) e.lastSeenAlive = now;
      else e.seenDeadAt = now;
    }
  }

  private readNew(): void {
    if (!existsSync(this.file)) return;
    const fd = openSync(this.file, 'r');
    try {
      const buf = Buffer.alloc(1 << 16);
      for (;;) {
        const n = readSync(fd, buf, 0, buf.length, this.offset);
        if (n <= 0) break;
        this.offset += n;
        this.partial += buf.subarray(0, n).toString('utf8');
      }
    } finally {
      closeSync(fd);
    }
    const parts = this.partial.split('\n');
    this.partial = parts.pop() ?? '';
    for (const raw of parts) {
      const line = parseLine(raw);
      if (line) this.add(line);
    }
  }

  private add(line: ExecLine): void {
    const key = `${line.pid}:${line.runId}:${line.token}`;
    if (line.kind === 'start') {
      const worker = line.fields.worker === undefined ? undefined : Number(line.fields.worker);
      const e: Execution = { start: line, other: [], worker, lastSeenAlive: line.atMs };
      this.executions.push(e);
      this.open.set(key, e);
      if (line.fields.lock) this.waitForLock(e, line.fields.lock);
      return;
    }
    const e =
      this.open.get(key) ??
      this.executions.find((x) => `${x.start.pid}:${x.start.runId}:${x.start.token}` === key && !x.end);
    if (!e) {
      // A line without its start: record it as its own execution so the checker sees it.
      this.executions.push({
        start: { ...line, kind: 'start' },
        end: END_KINDS.includes(line.kind) ? line : undefined,
        other: [],
        lastSeenAlive: line.atMs,
      });
      return;
    }
    if (!END_KINDS.includes(line.kind)) {
      e.other.push(line);
      e.lastSeenAlive = Math.max(e.lastSeenAlive, line.atMs);
      return;
    }
    e.end = line;
    e.lastSeenAlive = Math.max(e.lastSeenAlive, line.atMs);
    this.open.delete(key);
  }

  /** The command holds this flock until it and its children are gone: whoever gets it next learns when. */
  private waitForLock(e: Execution, path: string): void {
    const waiter = spawn('flock', ['-x', path, 'date', '+%s%N'], { stdio: ['ignore', 'pipe', 'ignore'] });
    this.waiters.add(waiter);
    let out = '';
    waiter.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    waiter.on('error', () => this.waiters.delete(waiter));
    waiter.on('close', () => {
      this.waiters.delete(waiter);
      if (/^\d+\s*$/.test(out)) e.lockFreedAt = Number(BigInt(out.trim()) / 1_000_000n);
    });
  }
}
