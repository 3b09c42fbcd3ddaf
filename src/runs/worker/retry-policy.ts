/** A run's retry delays: the shared full-jitter backoff (src/common/backoff.ts). */
export { backoffCeilingMs as retryCeilingMs, fullJitterDelayMs as retryDelayMs } from '../../common/backoff';
