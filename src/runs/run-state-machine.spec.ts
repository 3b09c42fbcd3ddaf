import { assertTransitions, canTransition, IllegalTransitionError, sourcesOf, TRANSITIONS } from './run-state-machine';
import { RunStatus as S } from './run-status';

describe('run state machine', () => {
  it.each([
    [S.PENDING, S.QUEUED],
    [S.QUEUED, S.RUNNING],
    [S.RUNNING, S.SUCCESS],
    [S.RUNNING, S.FAILED],
    [S.RUNNING, S.RETRYING],
    [S.RETRYING, S.RUNNING],
    [S.RETRYING, S.FAILED],
    [S.FAILED, S.QUEUED],
    [S.PENDING, S.CANCELLED],
    [S.QUEUED, S.CANCELLED],
    [S.RETRYING, S.CANCELLED],
    [S.RUNNING, S.CANCELLED],
  ])('allows %s -> %s', (from, to) => expect(canTransition(from, to)).toBe(true));

  it.each([
    [S.SUCCESS, S.RUNNING],
    [S.SUCCESS, S.QUEUED],
    [S.CANCELLED, S.QUEUED],
    [S.FAILED, S.RUNNING],
    [S.PENDING, S.RUNNING],
    [S.QUEUED, S.SUCCESS],
    [S.FAILED, S.CANCELLED],
    [S.RETRYING, S.SUCCESS],
  ])('refuses %s -> %s', (from, to) => {
    expect(canTransition(from, to)).toBe(false);
    expect(() => assertTransitions([from], to)).toThrow(IllegalTransitionError);
  });

  it('has no way out of SUCCESS or CANCELLED', () => {
    expect(TRANSITIONS[S.SUCCESS]).toEqual([]);
    expect(TRANSITIONS[S.CANCELLED]).toEqual([]);
  });

  it('reaches QUEUED only from PENDING or (by /retry) FAILED', () => {
    expect(sourcesOf(S.QUEUED).sort()).toEqual([S.FAILED, S.PENDING]);
  });
});
