import type { QueueOptions } from 'bull';
import type { AppConfig } from '../config/app-config';

/** Name of the backoff strategy every onceflow job uses (Bull looks it up by this key). */
export const BACKOFF = 'onceflow';

/** Delay for an unexpected handler error: short, jittered; the next claim decides what is left. */
function unexpectedErrorDelay(): number {
  return 500 + Math.floor(Math.random() * 1500);
}

/**
 * Bull settings. lockDuration/stalledInterval come from QUEUE_LOCK_DURATION_MS and
 * QUEUE_STALLED_INTERVAL_MS: a job whose worker died is handed to another worker after about
 * lockDuration + stalledInterval. maxStalledCount is above the worker concurrency because a frozen
 * worker's idle slots can each re-take a stalled job once (see README, "Crash redelivery").
 * Retries are Bull retries whose delay the handler chooses (RetryLaterError.retryDelayMs).
 */
export function queueOptions(config: AppConfig): QueueOptions {
  return {
    redis: config.redisUrl,
    prefix: `${config.redisPrefix}:bull`,
    settings: {
      lockDuration: config.queueLockDurationMs,
      lockRenewTime: Math.floor(config.queueLockDurationMs / 2),
      stalledInterval: config.queueStalledIntervalMs,
      maxStalledCount: config.queueMaxStalledCount,
      drainDelay: 1,
      backoffStrategies: {
        [BACKOFF]: (_attemptsMade: number, err: Error & { retryDelayMs?: number }) =>
          typeof err?.retryDelayMs === 'number' ? Math.max(1, Math.round(err.retryDelayMs)) : unexpectedErrorDelay(),
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
