import { withTimeout } from '../common/with-timeout';

export type LossReason = 'extend_failed' | 'extend_late' | 'extend_error' | 'check_failed' | 'stopped';

export interface HeartbeatOptions {
  /**
   * Extra work on each beat (e.g. extend the lease in Postgres). Resolving false means the work we
   * guard is no longer ours (cancelled, fenced out): abort. Throwing is logged and tolerated.
   */
  onBeat?: () => Promise<boolean>;
  onError?: (err: unknown) => void;
  /**
   * When the lease was asked for (ms since the epoch; default: now). Its validity counts from the
   * moment the request was sent, not from the answer: the store started the TTL in between.
   */
  askedAt?: number;
}

/**
 * Extends a lease (a Redis lock, a claim row) every third of its TTL and aborts `signal` the moment
 * an extend fails, errors past the lease's validity, or comes late: a late tick (a GC pause,
 * SIGSTOP) may mean the lease already lapsed and someone else holds it, so we stop rather than ask.
 * `extend` resolves true while the lease is still ours.
 */
export class Heartbeat {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private validUntilMs: number;
  private stopped = false;

  constructor(
    private readonly extend: () => Promise<boolean>,
    private readonly ttlMs: number,
    /** What the lease is, for the abort reason (a lock key, a notification id). */
    private readonly label: string,
    private readonly options: HeartbeatOptions = {},
  ) {
    this.validUntilMs = (options.askedAt ?? Date.now()) + ttlMs;
  }

  /**
   * Until when (ms since the epoch) the lease is surely ours: TTL after the last successful extend
   * was sent. Anything that must stop before someone else can take the lease counts from this.
   */
  get validUntil(): number {
    return this.validUntilMs;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  start(): this {
    this.schedule();
    return this;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** Aborts the lease on purpose (the process is shutting down) while the lock is still ours. */
  abort(reason: Error): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.stop();
  }

  private lose(reason: LossReason): void {
    if (!this.controller.signal.aborted) this.controller.abort(new LockLostError(this.label, reason));
    this.stop();
  }

  private schedule(): void {
    if (this.stopped) return;
    const interval = Math.max(10, Math.floor(this.ttlMs / 3));
    const due = Date.now() + interval;
    this.timer = setTimeout(() => void this.beat(due), interval);
    this.timer.unref?.();
  }

  private async beat(due: number): Promise<void> {
    if (this.stopped) return;
    const now = Date.now();
    // Later than the lock's validity: it may have expired and been taken while we slept.
    if (now >= this.validUntilMs || now - due > this.ttlMs / 3) return this.lose('extend_late');
    let ok: boolean;
    try {
      ok = await withTimeout(this.extend(), this.validUntilMs - now, 'the lock extend', 'lock extend timed out');
    } catch (err) {
      this.options.onError?.(err);
      if (Date.now() >= this.validUntilMs) return this.lose('extend_error');
      return this.schedule();
    }
    if (this.stopped) return;
    if (!ok) return this.lose('extend_failed');
    this.validUntilMs = now + this.ttlMs;
    if (this.options.onBeat) {
      try {
        if (!(await this.options.onBeat())) return this.lose('check_failed');
      } catch (err) {
        this.options.onError?.(err);
      }
    }
    this.schedule();
  }
}

/** The reason a lease is aborted when the worker shuts down: hand the work over, don't record it. */
export class ShutdownAbort extends Error {
  constructor() {
    super('worker is shutting down');
  }
}

export class LockLostError extends Error {
  constructor(
    readonly key: string,
    readonly reason: LossReason,
  ) {
    super(`lease ${key} lost (${reason})`);
  }
}
