/** Run statuses are wire values (API, database CHECK constraint, metrics labels). */
export enum RunStatus {
  PENDING = 'PENDING',
  QUEUED = 'QUEUED',
  RUNNING = 'RUNNING',
  RETRYING = 'RETRYING',
  SUCCESS = 'SUCCESS',
  FAILED = 'FAILED',
  CANCELLED = 'CANCELLED',
}

export const RUN_STATUSES = Object.values(RunStatus);
export const TERMINAL_STATUSES: readonly RunStatus[] = [RunStatus.SUCCESS, RunStatus.FAILED, RunStatus.CANCELLED];

export enum RunKind {
  MANUAL = 'manual',
  /** The one run a task gets when it is created from an external work item. */
  AUTHORING = 'authoring',
}
