import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import { isAlive } from './util';

export type LineKind = 'start' | 'done' | 'transient' | 'fail';

export interface ExecLine {
  kind: LineKind;
  runId: string;
  attempt: number;
  token: number;
  pid: number;
  /** Wall clock of the line, in ms (the orchestrator writes ns). */
  atMs: number;
}

/** One execution of a run: its start line, its end line if it wrote one, and what the watcher saw. */
export interface Execution {
  start: ExecLine;
  end?: ExecLine;
  /** Last time the watcher saw the command alive (ms). A killed command has no end line. */
  lastSeenAlive: number;
  /** When the watcher first saw it dead (ms), if it did. */
  seenDeadAt?: number;
}

export function parseLine(line: string): ExecLine | null {
  const [kind, runId, attempt, token, pid, at] = line.trim().split(' ');
  if (!['start', 'done', 'transient', 'fail'].includes(kind) || !at) return null;
  return { kind: kind as LineKind, runId, attempt: Number(attempt), token: Number(token), pid: Number(pid), atMs: Number(BigInt(at) / 1_000_000n) };
}

/**
 * The outside witness. The fake orchestrator appends start/done lines to a file; this follows the
 * file and, for every command that started and has not written its end line, checks every `everyMs`
 * whether its process is still alive. That gives a killed attempt an end: it was alive at least
 * until `lastSeenAlive`, so a next attempt that started before then overlapped it.
 */
export class Witness {
  readonly executions: Execution[] = [];
  private readonly open = new Map<string, Execution>();
  private offset = 0;
  private partial = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly file: string) {}

  start(everyMs = 50): this {
    this.timer = setInterval(() => this.poll(), everyMs);
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.poll();
  }

  lines(): ExecLine[] {
    return this.executions.flatMap((e) => (e.end ? [e.start, e.end] : [e.start]));
  }

  count(kind: LineKind, runId?: string): number {
    return this.executions.filter((e) => (kind === 'start' ? true : e.end?.kind === kind) && (!runId || e.start.runId === runId)).length;
  }

  /** Commands that started and are still alive (a killed worker's command must die with it). */
  alive(): Execution[] {
    return [...this.open.values()].filter((e) => e.seenDeadAt === undefined);
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
      const e: Execution = { start: line, lastSeenAlive: line.atMs };
      this.executions.push(e);
      this.open.set(key, e);
      return;
    }
    const e = this.open.get(key);
    if (!e) {
      // An end line without its start: record it as its own execution so the checker sees it.
      this.executions.push({ start: { ...line, kind: 'start' }, end: line, lastSeenAlive: line.atMs });
      return;
    }
    e.end = line;
    e.lastSeenAlive = Math.max(e.lastSeenAlive, line.atMs);
    this.open.delete(key);
  }
}
