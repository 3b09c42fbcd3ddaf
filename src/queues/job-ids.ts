/**
 * THE place job ids are made. Bull silently drops an `add` while any job with the same id exists
 * (waiting, active, delayed, completed or failed), so a run's job id carries its dispatch
 * generation: each dispatch, /retry or re-enqueue gets a fresh id, while a duplicate add of the
 * same dispatch collapses into one job.
 */
export function runJobId(runId: string, generation: number): string {
  return `run.${runId}.g${generation}`;
}

export function notificationJobId(notificationId: string, attempt: number): string {
  return `notification.${notificationId}.a${attempt}`;
}

/** The lock every processor of a run takes; the same key whatever job carries the run. */
export function runLockKey(runId: string): string {
  return `run:${runId}`;
}

export function notificationLockKey(notificationId: string): string {
  return `notification:${notificationId}`;
}
