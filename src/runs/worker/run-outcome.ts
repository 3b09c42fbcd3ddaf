import type { ExecutionResult } from '../executor/executor';
import { RunStatus } from '../run-status';
import { retryDelayMs } from './retry-policy';

export interface OutcomePolicy {
  maxAttempts: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  timeoutMs: number;
  lockTtlMs: number;
}

/** Why an aborted attempt stopped: the process is shutting down, or the lock/run is gone. */
export type AbortCause = 'shutdown' | 'lost';

/** What to do with an attempt's result; the processor only carries it out. */
export type RunOutcome =
  /** Shutting down while the lock is ours: back to the queue now, attempt not counted. */
  | { kind: 'hand-over' }
  /** Lock lost or run cancelled: not ours to record; the job comes back after `delayMs`. */
  | { kind: 'abandon'; delayMs: number }
  /** A fenced write of `to` (and, for RETRYING, the job comes back after `delayMs`). */
  | {
      kind: 'record';
      to: RunStatus.SUCCESS | RunStatus.FAILED | RunStatus.RETRYING;
      reason: string;
      lastError: string | null;
      delayMs: number;
    };

/**
 * The next status of a run after one attempt. Pure: `random` feeds the retry jitter, `stats`
 * (the command's use of the run API) is appended to the reason.
 */
export function decideOutcome(
  result: ExecutionResult,
  attempt: number,
  policy: OutcomePolicy,
  abortCause: AbortCause | null,
  stats = '',
  random: () => number = Math.random,
): RunOutcome {
  if (result.outcome === 'aborted') {
    return abortCause === 'shutdown' ? { kind: 'hand-over' } : { kind: 'abandon', delayMs: policy.lockTtlMs + 100 };
  }
  const what = describeResult(result, policy.timeoutMs);
  const withStats = (reason: string) => (stats ? `${reason}; ${stats}` : reason);
  if (result.outcome === 'success')
    return { kind: 'record', to: RunStatus.SUCCESS, reason: withStats(what), lastError: null, delayMs: 0 };
  if (result.outcome === 'transient' && attempt < policy.maxAttempts) {
    const delayMs = retryDelayMs(attempt, policy.retryBaseDelayMs, policy.retryMaxDelayMs, random);
    return {
      kind: 'record',
      to: RunStatus.RETRYING,
      reason: withStats(`${what} (transient); retry in ${delayMs} ms`),
      lastError: what,
      delayMs,
    };
  }
  const reason =
    result.outcome === 'transient'
      ? `${what} (transient); attempts exhausted (${attempt}/${policy.maxAttempts})`
      : what;
  return { kind: 'record', to: RunStatus.FAILED, reason: withStats(reason), lastError: what, delayMs: 0 };
}

/** One line on how the command ended, for the run's last_error and its event's reason. */
export function describeResult(result: ExecutionResult, timeoutMs: number): string {
  if (result.startError) return `could not start the command: ${result.startError}`;
  if (result.timedOut) return `timed out after ${timeoutMs} ms`;
  if (result.signal) return `killed by ${result.signal}`;
  return `exit ${result.exitCode}`;
}
