import { RunStatus } from './run-status';

const S = RunStatus;

/**
 * The run state machine, in one place. RUNNING → RUNNING is a re-claim of a run whose holder's
 * lease expired (a dead worker); FAILED → QUEUED happens only through POST /runs/:id/retry.
 */
export const TRANSITIONS: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  [S.PENDING]: [S.QUEUED, S.CANCELLED],
  [S.QUEUED]: [S.RUNNING, S.CANCELLED],
  [S.RUNNING]: [S.SUCCESS, S.FAILED, S.RETRYING, S.CANCELLED, S.RUNNING],
  [S.RETRYING]: [S.RUNNING, S.FAILED, S.CANCELLED],
  [S.FAILED]: [S.QUEUED],
  [S.SUCCESS]: [],
  [S.CANCELLED]: [],
};

export class IllegalTransitionError extends Error {
  constructor(from: RunStatus, to: RunStatus) {
    super(`illegal run transition ${from} -> ${to}`);
  }
}

export function canTransition(from: RunStatus, to: RunStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Every status a run may leave for `to`. */
export function sourcesOf(to: RunStatus): RunStatus[] {
  return (Object.keys(TRANSITIONS) as RunStatus[]).filter((from) => canTransition(from, to));
}

/** Refuses a transition the machine does not allow, before any SQL is sent. */
export function assertTransitions(from: readonly RunStatus[], to: RunStatus): void {
  for (const f of from) if (!canTransition(f, to)) throw new IllegalTransitionError(f, to);
}
