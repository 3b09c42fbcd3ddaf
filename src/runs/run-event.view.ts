import { ApiProperty } from '@nestjs/swagger';
import { orNull } from '../common/openapi';
import { RUN_STATUSES, RunStatus } from './run-status';

/** One transition of a run (contract: GET /api/runs/:id/events). */
export class RunEventView {
  @ApiProperty({ enum: orNull(RUN_STATUSES), nullable: true, description: 'null for the creation' })
  from: RunStatus | null;

  @ApiProperty({ enum: RunStatus })
  to: RunStatus;

  @ApiProperty({ format: 'date-time' })
  at: string;

  @ApiProperty({ type: 'integer' })
  attempt: number;

  @ApiProperty({ type: 'integer' })
  fencingToken: number;

  @ApiProperty({ type: String, nullable: true })
  workerId: string | null;

  @ApiProperty({ type: String, nullable: true })
  reason: string | null;
}

/** Every transition of a run, in order. */
export class RunEventList {
  @ApiProperty({ type: [RunEventView] })
  items: RunEventView[];
}
