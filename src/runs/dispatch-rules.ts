import { RunStatus } from './run-status';

const WHY_NOT: Partial<Record<RunStatus, string>> = {
  [RunStatus.QUEUED]: 'run is already queued',
  [RunStatus.RUNNING]: 'run is already running',
  [RunStatus.RETRYING]: 'run is retrying',
  [RunStatus.SUCCESS]: 'run already succeeded',
  [RunStatus.FAILED]: 'run failed; use POST /api/runs/:id/retry',
  [RunStatus.CANCELLED]: 'run was cancelled',
};

/** The producer guard of one run's dispatch: short, so that a crashed holder blocks it only briefly. */
export const dispatchGuardKey = (runId: string) => `dispatch:${runId}`;
export const DISPATCH_GUARD_TTL_MS = 5000;

/** Why a run in `status` cannot be dispatched: the message of the 409, and of a bulk item. */
export function whyNotDispatchable(status: RunStatus): string {
  return WHY_NOT[status] ?? `run is ${status}`;
}
