import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { RunStatus } from './run-status';
import { RunRow } from './run-transitions.repository';

/**
 * The API shape of a run (contract: GET /api/runs/:id). A class so that its `@ApiProperty`s give
 * the OpenAPI schema; the answers are still plain objects built by `toRunView`.
 */
export class RunView {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ format: 'uuid' })
  projectId: string;

  @ApiProperty({
    type: String,
    format: 'uuid',
    nullable: true,
    description: 'The task the run belongs to (Plane work items)',
  })
  taskId: string | null;

  @ApiProperty()
  requirement: string;

  @ApiProperty({ enum: RunStatus })
  status: RunStatus;

  @ApiProperty({ type: 'integer', description: 'Attempts of the current attempt series' })
  attempts: number;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  startedAt: string | null;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  finishedAt: string | null;

  @ApiProperty({ type: String, nullable: true })
  lastError: string | null;

  @ApiProperty({ format: 'date-time' })
  createdAt: string;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'Last 64 KiB of the command output (GET /api/runs/:id only)',
  })
  outputTail?: string | null;
}

/** A page of `GET /api/runs`, newest first. */
export class RunPage {
  @ApiProperty({ type: [RunView] })
  items: RunView[];

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Pass as `cursor` for the next page; null on the last one',
  })
  nextCursor: string | null;
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
