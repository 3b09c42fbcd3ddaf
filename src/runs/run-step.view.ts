import { ApiProperty } from '@nestjs/swagger';
import { StepStatus } from './steps/run-step.entity';

/** One step of a run's journal (contract: GET /api/runs/:id/steps). Recorded outputs are not served. */
export class RunStepView {
  @ApiProperty({ example: 'plan', description: '1–128 characters of [A-Za-z0-9._:-]' })
  name: string;

  @ApiProperty({
    enum: StepStatus,
    description: 'DONE: recorded once, replayed to later attempts; STARTED: not (yet) finished with exit 0',
  })
  status: StepStatus;

  @ApiProperty({ type: 'integer', description: 'The attempt that started it last, or recorded it DONE' })
  attempt: number;

  @ApiProperty({ type: 'integer' })
  fencingToken: number;

  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: "The step command's last exit code (null while it first runs)",
  })
  exitCode: number | null;

  @ApiProperty({ type: 'integer', description: 'Bytes of stdout recorded (at most 1 MiB)' })
  outputBytes: number;

  @ApiProperty({ format: 'date-time' })
  startedAt: string;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  finishedAt: string | null;
}

/** A run's step journal, in order of first start. */
export class RunStepList {
  @ApiProperty({ type: [RunStepView] })
  items: RunStepView[];
}
