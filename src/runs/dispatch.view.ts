import { ApiProperty } from '@nestjs/swagger';
import { RunStatus } from './run-status';

/** The answer of dispatch and retry (contract: 202 `{ runId, status: "QUEUED", jobId }`). */
export class DispatchView {
  @ApiProperty({ format: 'uuid' })
  runId: string;

  @ApiProperty({ enum: [RunStatus.QUEUED] })
  status: RunStatus.QUEUED;

  @ApiProperty({
    example: 'run.5f0c2a9e-1f1b-4c1e-9d0a-2f8a4f1d7c11.g1',
    description: 'The Bull job id: run.<run id>.g<dispatch generation>',
  })
  jobId: string;
}
