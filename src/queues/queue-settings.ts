import type { QueueOptions } from 'bull';
import { fullJitterDelayMs } from '../common/backoff';
import type { AppConfig } from '../config/app-config';

/** Name of the backoff strategy every onceflow job uses (Bull looks it up by this key). */
export const BACKOFF = 'onceflow';

/**
 * Delay before the next attempt of a job whose handler threw anything but a RetryLaterError (an
 * infrastructure error: Postgres or Redis unreachable, a bug). Exponential in the job's attempt
 * count with full jitter, capped by INFRA_RETRY_MAX_DELAY_MS: during an outage every job backs
 * off instead of hammering the dead service every second or two. The exponent is Bull's own
 * attempt count, shared by every worker that takes the job; a job that already retried for
 * explicit reasons starts further up the curve, still under the cap.
 */
export function infraRetryDelayMs(
  attemptsMade: number,
  queue: Pick<AppConfig['queue'], 'infraRetryBaseDelayMs' | 'infraRetryMaxDelayMs'>,
): number {
  return Math.max(1, fullJitterDelayMs(attemptsMade, queue.infraRetryBaseDelayMs, queue.infraRetryMaxDelayMs));
}

/**
 * Bull settings. lockDuration/stalledInterval come from QUEUE_LOCK_DURATION_MS and
 * QUEUE_STALLED_INTERVAL_MS: a job whose worker died is handed to another worker after about
 * lockDuration + stalledInterval. maxStalledCount is above the worker concurrency because a frozen
 * worker's idle slots can each re-take a stalled job once (see README, "Crash redelivery").
 * Retries are Bull retries whose delay the handler chooses (RetryLaterError.retryDelayMs), or
 * infraRetryDelayMs for any other error.
 */
export function queueOptions(config: AppConfig): QueueOptions {
  return {
    redis: config.redis.url,
    prefix: `${config.redis.prefix}:bull`,
    settings: {
      lockDuration: config.queue.lockDurationMs,
      lockRenewTime: Math.floor(config.queue.lockDurationMs / 2),
      stalledInterval: config.queue.stalledIntervalMs,
      maxStalledCount: config.queue.maxStalledCount,
      drainDelay: 1,
      backoffStrategies: {
        [BACKOFF]: (attemptsMade: number, err: Error & { retryDelayMs?: number }) =>
          typeof err?.retryDelayMs === 'number'
            ? Math.max(1, Math.round(err.retryDelayMs))
            : infraRetryDelayMs(attemptsMade, config.queue),
      },
    },
    defaultJobOptions: {
      // Bull's own attempt budget is only a backstop; RUN_MAX_ATTEMPTS is enforced in Postgres.
      attempts: 100_000,
      backoff: { type: BACKOFF },
      removeOnComplete: { age: 24 * 3600, count: 5000 },
      removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
    },
  };
}
