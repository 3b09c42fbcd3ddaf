export type ClaimLossReason = 'taken' | 'late' | 'error';

/**
 * Keeps a delivery claim alive while Slack has the request: extends `claimed_until` every third
 * of the lease, so the lease can stay short (a dead deliverer's row is free again soon) however
 * long Slack takes to answer. `signal` fires when the claim may no longer be ours — taken over,
 * unextendable past its validity, or a tick so late (GC pause, SIGSTOP) that it may have lapsed —
 * and the POST is aborted rather than racing the next holder.
 */
export class ClaimKeeper {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private validUntil: number;

  constructor(
    private readonly extend: () => Promise<boolean>,
    private readonly leaseMs: number,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.validUntil = Date.now() + leaseMs;
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

  private lose(reason: ClaimLossReason): void {
    if (!this.controller.signal.aborted) this.controller.abort(new Error(`notification claim lost (${reason})`));
    this.stop();
  }

  private schedule(): void {
    if (this.stopped) return;
    const interval = Math.max(10, Math.floor(this.leaseMs / 3));
    const due = Date.now() + interval;
    this.timer = setTimeout(() => void this.beat(due), interval);
    this.timer.unref?.();
  }

  private async beat(due: number): Promise<void> {
    if (this.stopped) return;
    const now = Date.now();
    if (now >= this.validUntil || now - due > this.leaseMs / 3) return this.lose('late');
    let ok: boolean;
    try {
      ok = await this.extend();
    } catch (err) {
      this.onError(err);
      if (Date.now() >= this.validUntil) return this.lose('error');
      return this.schedule();
    }
    if (this.stopped) return;
    if (!ok) return this.lose('taken');
    this.validUntil = now + this.leaseMs;
    this.schedule();
  }
}
