// Queue names are wire values: they name Redis keys that live across deploys. Renaming one
// strands its waiting jobs — drain the old queue first (the reconciler re-enqueues from Postgres).
export const RUNS_QUEUE = 'runs';
export const NOTIFICATIONS_QUEUE = 'notifications';
export const ALL_QUEUES = [RUNS_QUEUE, NOTIFICATIONS_QUEUE] as const;

/** Payloads carry ids only; processors reload state from Postgres, the source of truth. */
export interface RunJobData {
  runId: string;
  generation: number;
}
export interface NotificationJobData {
  notificationId: string;
}
