import { ApiProperty } from '@nestjs/swagger';
import { orNull } from '../common/openapi';
import { RUN_STATUSES, RunStatus } from '../runs/run-status';
import { TaskStatus } from './task.entity';

/** The API shape of a task (contract: GET /api/tasks): its external reference and its run. */
export class TaskView {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ format: 'uuid' })
  projectId: string;

  @ApiProperty({ type: String, nullable: true, example: 'plane' })
  externalProvider: string | null;

  @ApiProperty({ type: String, nullable: true, description: 'For Plane: the work item id' })
  externalId: string | null;

  @ApiProperty({ type: String, nullable: true })
  url: string | null;

  @ApiProperty()
  title: string;

  @ApiProperty({ enum: TaskStatus })
  status: TaskStatus;

  @ApiProperty({ type: 'object', additionalProperties: true })
  metadata: Record<string, unknown>;

  /** The task's authoring run (at most one: ux_runs_task_authoring). */
  @ApiProperty({ type: String, format: 'uuid', nullable: true, description: "The task's authoring run" })
  runId: string | null;

  @ApiProperty({ enum: orNull(RUN_STATUSES), nullable: true })
  runStatus: RunStatus | null;

  @ApiProperty({ format: 'date-time' })
  createdAt: string;

  @ApiProperty({ format: 'date-time' })
  updatedAt: string;
}

/** Tasks, newest first. */
export class TaskList {
  @ApiProperty({ type: [TaskView] })
  items: TaskView[];
}

/** A task row joined with its authoring run, straight from Postgres. */
export interface TaskRow {
  id: string;
  project_id: string;
  external_provider: string | null;
  external_id: string | null;
  url: string | null;
  title: string;
  status: TaskStatus;
  metadata: Record<string, unknown>;
  run_id: string | null;
  run_status: RunStatus | null;
  created_at: Date;
  updated_at: Date;
}

export const TASK_SELECT = `SELECT t.*, r.id AS run_id, r.status AS run_status
  FROM tasks t LEFT JOIN runs r ON r.task_id = t.id AND r.kind = 'authoring'`;

export function toTaskView(row: TaskRow): TaskView {
  return {
    id: row.id,
    projectId: row.project_id,
    externalProvider: row.external_provider,
    externalId: row.external_id,
    url: row.url,
    title: row.title,
    status: row.status,
    metadata: row.metadata,
    runId: row.run_id,
    runStatus: row.run_status,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}
