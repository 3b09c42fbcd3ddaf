import type { ExecutionResult } from '../executor/executor';
import { RunStatus } from '../run-status';
import { decideOutcome, describeResult, OutcomePolicy } from './run-outcome';

const policy: OutcomePolicy = {
  maxAttempts: 3,
  retryBaseDelayMs: 1000,
  retryMaxDelayMs: 8000,
  timeoutMs: 500,
  lockTtlMs: 2000,
};
const result = (over: Partial<ExecutionResult>): ExecutionResult => ({
  outcome: 'success',
  exitCode: 0,
  signal: null,
  timedOut: false,
  outputTail: '',
  durationMs: 1,
  ...over,
});
const half = () => 0.5;

describe('decideOutcome', () => {
  it.each([
    [
      'success',
      result({}),
      1,
      { kind: 'record', to: RunStatus.SUCCESS, reason: 'exit 0', lastError: null, delayMs: 0 },
    ],
    [
      'a failure',
      result({ outcome: 'failed', exitCode: 2 }),
      1,
      { kind: 'record', to: RunStatus.FAILED, reason: 'exit 2', lastError: 'exit 2', delayMs: 0 },
    ],
    [
      'a transient failure with attempts left',
      result({ outcome: 'transient', exitCode: 75 }),
      2,
      {
        kind: 'record',
        to: RunStatus.RETRYING,
        reason: 'exit 75 (transient); retry in 1000 ms',
        lastError: 'exit 75',
        delayMs: 1000,
      },
    ],
    [
      'a transient failure on the last attempt',
      result({ outcome: 'transient', exitCode: 75 }),
      3,
      {
        kind: 'record',
        to: RunStatus.FAILED,
        reason: 'exit 75 (transient); attempts exhausted (3/3)',
        lastError: 'exit 75',
        delayMs: 0,
      },
    ],
  ])('%s', (_, r, attempt, expected) => {
    expect(decideOutcome(r, attempt, policy, null, '', half)).toEqual(expected);
  });

  it('hands the run over when the attempt was aborted by a shutdown, and abandons it otherwise', () => {
    const aborted = result({ outcome: 'aborted', exitCode: null, signal: 'SIGKILL' });
    expect(decideOutcome(aborted, 1, policy, 'shutdown')).toEqual({ kind: 'hand-over' });
    expect(decideOutcome(aborted, 1, policy, 'lost')).toEqual({ kind: 'abandon', delayMs: 2100 });
    expect(decideOutcome(aborted, 1, policy, null)).toEqual({ kind: 'abandon', delayMs: 2100 });
  });

  it('appends the command’s run-API statistics to the reason, not to last_error', () => {
    const out = decideOutcome(result({ outcome: 'failed', exitCode: 1 }), 1, policy, null, 'steps: 2 done');
    expect(out).toMatchObject({ reason: 'exit 1; steps: 2 done', lastError: 'exit 1' });
  });
});

describe('describeResult', () => {
  it('names a start error, a timeout, a signal or the exit code, in that order', () => {
    expect(describeResult(result({ startError: 'ENOENT', timedOut: true }), 500)).toBe(
      'could not start the command: ENOENT',
    );
    expect(describeResult(result({ timedOut: true, signal: 'SIGKILL' }), 500)).toBe('timed out after 500 ms');
    expect(describeResult(result({ signal: 'SIGTERM', exitCode: null }), 500)).toBe('killed by SIGTERM');
    expect(describeResult(result({ exitCode: 3 }), 500)).toBe('exit 3');
  });
});
