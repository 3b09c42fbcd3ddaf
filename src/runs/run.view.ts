import { RunStatus } from './run-status';
import { RunRow } from './run-transitions.repository';

/** The API shape of a run (contract: GET /api/runs/:id). */
export interface RunView {
  id: string;
  projectId: string;
  taskId: string | null;
  requirement: string;
  status: RunStatus;
  attempts: number;
  startedAt: string | null;
  finishedAt: string | null;
  lastError: string | null;
  createdAt: string;
  outputTail?: string | null;
}

const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());

export function toRunView(row: Omit<RunRow, 'from_status'>, withOutput = false): RunView {
  const view: RunView = {
    id: row.id,
    projectId: row.project_id,
    taskId: row.task_id,
    requirement: row.requirement,
    status: row.status,
    attempts: row.attempts,
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
    lastError: row.last_error,
    createdAt: iso(row.created_at)!,
  };
  if (withOutput) view.outputTail = row.output_tail;
  return view;
}
