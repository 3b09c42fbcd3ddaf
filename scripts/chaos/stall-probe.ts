import { readFileSync } from 'node:fs';
import type { AppProcess } from './app-process';
import { sleep } from './util';

/** A span during which something did not run: a worker that did not answer, or this process itself. */
export interface Stall {
  pid: number;
  label: string;
  atMs: number;
  untilMs: number;
}

/**
 * How late this process's own timers run: a tick every `everyMs`, and how much later than due each
 * one came. A probe answered late because WE were not running says nothing about the worker, so
 * the probe subtracts our own lag; the Slack stub's clock is late by the same amount.
 */
export class RunnerLag {
  /** [due, came] of every tick that came late by more than a few ms. */
  private readonly late: Array<[number, number]> = [];
  private timer: NodeJS.Timeout | undefined;
  max = 0;

  start(everyMs = 20): this {
    let due = Date.now() + everyMs;
    this.timer = setInterval(() => {
      const now = Date.now();
      if (now - due > 5) {
        this.late.push([due, now]);
        this.max = Math.max(this.max, now - due);
      }
      due = now + everyMs;
    }, everyMs);
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** How long, in total, this process was not running between `from` and `to`. */
  during(from: number, to: number): number {
    let ms = 0;
    for (const [due, came] of this.late) ms += Math.max(0, Math.min(came, to) - Math.max(due, from));
    return ms;
  }

  /** How long this process had not been running right before `t` (0 if it was). */
  before(t: number): number {
    const hit = this.late.find(([due, came]) => due <= t && t <= came + 20);
    return hit ? hit[1] - hit[0] : 0;
  }
}

/**
 * Asks every worker `GET /health/live` again and again, one probe at a time each. A worker whose
 * event loop does not answer for longer than `thresholdMs` (beyond our own lag), or whose main
 * thread the kernel kept waiting for a CPU that long meanwhile, was stalled — a long GC, CPU
 * starvation on a loaded box — which, like a freeze, can cost it its locks: its heartbeat comes
 * late, it drops its leases and kills its commands. Such a stall is a fault the checker may
 * attribute a re-execution to; it is measured from outside (our clock, the kernel's scheduler
 * statistics), never asked of the app.
 */
export class StallProbe {
  readonly stalls: Stall[] = [];
  private stopped = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly workers: () => AppProcess[],
    private readonly lag: RunnerLag,
    private readonly thresholdMs: number,
    private readonly everyMs = 100,
  ) {}

  start(): this {
    this.loops = [this.loop()];
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async loop(): Promise<void> {
    const inFlight = new Map<AppProcess, Promise<void>>();
    while (!this.stopped) {
      for (const w of this.workers())
        if (w.running && w.ready && !inFlight.has(w))
          inFlight.set(
            w,
            this.probe(w).finally(() => inFlight.delete(w)),
          );
      await sleep(this.everyMs);
    }
    await Promise.all(inFlight.values());
  }

  private async probe(w: AppProcess): Promise<void> {
    const pid = w.pid;
    const sent = Date.now();
    const waitedBefore = runQueueWaitMs(pid);
    const ok = await fetch(`${w.url}/health/live`, { signal: AbortSignal.timeout(30_000) }).then(
      async (res) => (await res.arrayBuffer(), true),
      () => false,
    );
    const came = Date.now();
    // A killed worker answers nothing; its death is a fault of its own.
    if (!ok || w.pid !== pid) return;
    // Late because the worker's event loop was busy (minus the time WE were not running to read
    // the answer), or because the kernel kept the worker's main thread waiting for a CPU — which
    // starves it and us alike on a loaded box, so our own lag must not hide it.
    const starved = runQueueWaitMs(pid) - waitedBefore;
    const stalled = Math.max(came - sent - this.lag.during(sent, came), starved);
    // The stall may have begun up to one probe period before this probe was sent.
    if (stalled > this.thresholdMs) this.stalls.push({ pid, label: w.label, atMs: sent - this.everyMs, untilMs: came });
    await sleep(this.everyMs);
  }
}

/** How long the process's main thread has waited for a CPU in all (ms): /proc/<pid>/schedstat, field 2. */
function runQueueWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6 || 0;
  } catch {
    return 0;
  }
}
