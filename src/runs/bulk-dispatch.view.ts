import { ApiExtraModels, ApiProperty, getSchemaPath } from '@nestjs/swagger';
import { RunsErrorCode } from './runs.errors';
import { DispatchView } from './dispatch.view';

/** Why one run of a bulk dispatch was not queued: the code and message its single dispatch would give. */
export class BulkDispatchErrorView {
  @ApiProperty({
    enum: [RunsErrorCode.RUN_NOT_FOUND, RunsErrorCode.RUN_NOT_DISPATCHABLE, RunsErrorCode.DISPATCH_IN_PROGRESS],
    description: 'RUN_NOT_FOUND (404 on the single route), or RUN_NOT_DISPATCHABLE / DISPATCH_IN_PROGRESS (409)',
  })
  code: RunsErrorCode;

  @ApiProperty({ example: 'run is already queued', description: "The single route's message" })
  message: string;
}

/** A run of a bulk dispatch that was not queued; nothing about it changed. */
export class BulkDispatchRefusalView {
  @ApiProperty({ format: 'uuid' })
  runId: string;

  @ApiProperty({ type: BulkDispatchErrorView })
  error: BulkDispatchErrorView;
}

export type BulkDispatchItem = DispatchView | BulkDispatchRefusalView;

/** The answer of POST /api/runs/dispatch: one item per run id, in the order given. */
@ApiExtraModels(DispatchView, BulkDispatchRefusalView)
export class BulkDispatchView {
  @ApiProperty({
    type: 'array',
    items: { oneOf: [{ $ref: getSchemaPath(DispatchView) }, { $ref: getSchemaPath(BulkDispatchRefusalView) }] },
    description: 'Queued (`status`, `jobId`) or refused (`error`), one per run id, in the order of the request',
  })
  items: BulkDispatchItem[];
}
