import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { retryWithBackoff } from '../common/backoff';
import { isTransientDbError } from '../database/pg-errors';
import { MetricsService } from '../metrics/metrics.service';
import { Heartbeat } from '../locks/heartbeat';
import { ClaimedNotification, ClaimMiss, NotificationClaimsRepository } from './notification-claims.repository';
import { notificationRetryDelayMs } from './retry-backoff';
import { SlackClient, SlackOutcome } from './slack.client';

export type DeliveryResult =
  | { kind: 'sent'; attempts: number }
  /** FAILED for good (out of attempts, or Slack refused the message). */
  | { kind: 'failed'; error: string }
  /** The attempt failed; the row is PENDING again and due in `delayMs`. */
  | { kind: 'retry'; delayMs: number; error: string }
  | ClaimMiss;

/** How long recording "SENT" keeps retrying through a database outage before giving up. */
const RECORD_SENT_DEADLINE_MS = 60_000;
/**
 * How long a POST may still finish after its claim or lock was lost. A worker that stalled (GC,
 * CPU starvation) wakes up with its heartbeat timer first and Slack's answer still unread in the
 * socket: dropping the POST there would forget a 200 and let the next holder post the message
 * again. The grace lets such an answer be read and recorded;
 * a POST that is really hanging is still dropped.
 */
export const POST_ABORT_GRACE_MS = 300;

/**
 * One delivery attempt of one outbox row: claim (conditional UPDATE with a lease) → POST →
 * record. The claim lease is RUN_LOCK_TTL_MS, kept alive by a Heartbeat while Slack has the
 * request; "SENT" is committed right after Slack's 200, the only window where a crash can repeat
 * a message (see docs/notifications.md).
 */
@Injectable()
export class NotificationDeliveryService {
  private readonly logger = new Logger(NotificationDeliveryService.name);

  constructor(
    private readonly claims: NotificationClaimsRepository,
    private readonly slack: SlackClient,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get leaseMs(): number {
    return this.config.runs.lockTtlMs;
  }

  async deliver(notificationId: string, signal?: AbortSignal): Promise<DeliveryResult> {
    // A replica without a URL must not burn the attempts of rows a configured replica wrote.
    if (!this.slack.configured) return { kind: 'skip', reason: 'SLACK_WEBHOOK_URL is not set in this process' };
    if (signal?.aborted) return { kind: 'later', delayMs: this.leaseMs + 100, reason: 'lock lost before the claim' };
    const max = this.config.notify.maxAttempts;
    // The lease runs from the moment the claim was asked for: Postgres started it in between.
    const askedAt = Date.now();
    const claim = await this.claims.claim(notificationId, this.leaseMs, max);
    if (!claim) return this.claims.whyNot(notificationId, max);
    const keeper = new Heartbeat(
      () => this.claims.extend(claim, this.leaseMs),
      this.leaseMs,
      `notification ${notificationId}`,
      {
        askedAt,
        onError: (err) =>
          this.logger.warn({ msg: 'notification claim extend failed', notificationId, err: String(err) }),
      },
    ).start();
    const lost = [keeper.signal, ...(signal ? [signal] : [])];
    if (lost.some((s) => s.aborted)) {
      keeper.stop();
      return { kind: 'later', delayMs: this.leaseMs + 100, reason: 'claim or lock lost before the POST' };
    }
    // A POST in flight is dropped only when the claim in Postgres is lost (taken over, or our own
    // extend came too late: we stalled). The Redis lock alone is also lost when Redis restarts
    // without persistence — the key is simply gone while the row is still ours — and dropping a
    // POST Slack already has would only make the next holder post the message again.
    const post = abortAfterGrace([keeper.signal], POST_ABORT_GRACE_MS);
    // Written only while the claim surely holds, with a fifth of the lease to spare for the request
    // to reach Slack: a process that froze before the write (its connection was being opened) and
    // woke past that point sends nothing, and the row's next holder posts the message once.
    const writeBy = () => keeper.validUntil - this.leaseMs / 5;
    const mayWrite = () => !keeper.signal.aborted && Date.now() < writeBy();
    let outcome: SlackOutcome;
    try {
      outcome = await this.slack.post(claim.message, post.signal, mayWrite);
    } finally {
      post.dispose();
      keeper.stop();
    }
    return this.record(claim, outcome);
  }

  private async record(claim: ClaimedNotification, outcome: SlackOutcome): Promise<DeliveryResult> {
    const log = { notificationId: claim.id, runId: claim.runId, attempt: claim.attempts };
    switch (outcome.kind) {
      case 'ok': {
        const recorded = await this.recordSent(claim);
        this.metrics.notifications.inc({ outcome: 'sent' });
        if (recorded) this.logger.log({ msg: 'notification sent', ...log });
        // Another deliverer recorded it first: Slack now shows this message twice.
        else this.logger.warn({ msg: 'notification posted again after another deliverer sent it (duplicate)', ...log });
        return { kind: 'sent', attempts: claim.attempts };
      }
      case 'aborted':
        if (outcome.unwritten) {
          // Slack never got it; the row is no longer surely ours, so its next holder posts it.
          this.logger.warn({ msg: 'notification not posted: the claim could lapse before the write', ...log });
          return {
            kind: 'later',
            delayMs: this.leaseMs + 100,
            reason: 'claim could lapse before the POST was written',
          };
        }
        // Claim or lock lost mid-POST: we cannot know whether Slack got it, and the row is no
        // longer ours to write. Its next holder takes it once the (no longer extended) lease lapses.
        this.logger.warn({ msg: 'notification post aborted: claim or lock lost', ...log });
        return { kind: 'later', delayMs: this.leaseMs + 100, reason: 'claim or lock lost while posting' };
      case 'permanent':
        return this.fail(claim, outcome.error);
      case 'transient': {
        if (claim.attempts >= this.config.notify.maxAttempts) return this.fail(claim, outcome.error);
        const delayMs = notificationRetryDelayMs(
          claim.attempts,
          this.config.notify.retryBaseDelayMs,
          outcome.retryAfterMs,
        );
        if (!(await this.claims.markRetry(claim, delayMs, outcome.error))) return this.takenOver(claim);
        this.metrics.notifications.inc({ outcome: 'retried' });
        this.logger.warn({
          msg: 'notification attempt failed; will retry',
          ...log,
          retryInMs: delayMs,
          error: outcome.error,
        });
        return { kind: 'retry', delayMs, error: outcome.error };
      }
    }
  }

  private async fail(claim: ClaimedNotification, error: string): Promise<DeliveryResult> {
    if (!(await this.claims.markFailed(claim, error))) return this.takenOver(claim);
    this.metrics.notifications.inc({ outcome: 'failed' });
    this.logger.error({
      msg: 'notification FAILED',
      notificationId: claim.id,
      runId: claim.runId,
      attempts: claim.attempts,
      error,
    });
    return { kind: 'failed', error };
  }

  private takenOver(claim: ClaimedNotification): DeliveryResult {
    this.logger.warn({
      msg: 'notification claim was taken over; recording nothing',
      notificationId: claim.id,
      attempt: claim.attempts,
    });
    return { kind: 'later', delayMs: this.leaseMs + 100, reason: 'claim taken over by another deliverer' };
  }

  /** Slack has the message: keep trying to say so through a database blip, or the next holder posts it again. */
  private async recordSent(claim: ClaimedNotification): Promise<boolean> {
    return retryWithBackoff(() => this.claims.markSent(claim.id), {
      retryable: isTransientDbError,
      firstDelayMs: 50,
      maxDelayMs: 2000,
      deadline: Date.now() + RECORD_SENT_DEADLINE_MS,
      onRetry: (err, delay) =>
        this.logger.warn({
          msg: 'recording a sent notification failed; retrying',
          notificationId: claim.id,
          retryInMs: delay,
          err: String(err),
        }),
    });
  }
}

/** A signal that fires `graceMs` after the first of `signals` fired. */
function abortAfterGrace(signals: AbortSignal[], graceMs: number): { signal: AbortSignal; dispose(): void } {
  const ctl = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    timer ??= setTimeout(() => ctl.abort(), graceMs);
  };
  for (const s of signals) s.addEventListener('abort', onAbort, { once: true });
  return {
    signal: ctl.signal,
    dispose: () => {
      clearTimeout(timer);
      for (const s of signals) s.removeEventListener('abort', onAbort);
    },
  };
}
