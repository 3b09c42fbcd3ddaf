import { Body, Controller, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequireApiKey } from '../common/api-key.guard';
import { ApiErrors } from '../common/openapi';
import { BulkDispatchService } from './bulk-dispatch.service';
import { BulkDispatchView } from './bulk-dispatch.view';
import { DispatchService } from './dispatch.service';
import { BulkDispatchDto } from './dto/bulk-dispatch.dto';
import { DispatchView } from './dispatch.view';
import { ListRunsQuery } from './dto/list-runs.query';
import { RunEventList } from './run-event.view';
import { RunStepList } from './run-step.view';
import { RunsService } from './runs.service';
import { RunPage, RunView } from './run.view';

// Every route states its summary, its success schema (`type: …View`, a class beside the feature)
// and each error status it can answer; test/openapi.e2e-spec.ts fails when one is missing.
@ApiTags('runs')
@RequireApiKey()
@Controller('api/runs')
export class RunsController {
  constructor(
    private readonly runs: RunsService,
    private readonly dispatcher: DispatchService,
    private readonly bulk: BulkDispatchService,
  ) {}

  @Get()
  @ApiOperation({ summary: 'List runs, newest first' })
  @ApiOkResponse({ description: 'A page of runs', type: RunPage })
  @ApiErrors({ 400: 'Invalid projectId, status, limit or cursor' })
  list(@Query() q: ListRunsQuery): Promise<RunPage> {
    return this.runs.list({ projectId: q.projectId, status: q.status, cursor: q.cursor, limit: q.limit ?? 50 });
  }

  @Post('dispatch')
  @HttpCode(200)
  @ApiOperation({ summary: 'Queue many PENDING runs at once (1 to 100), each answered as its own dispatch would be' })
  @ApiOkResponse({
    description:
      'One item per run id, in the order given: QUEUED with its job id, or the code and message of the refusal',
    type: BulkDispatchView,
  })
  @ApiErrors({ 400: 'runIds is not a list of 1 to 100 distinct UUIDs; nothing was dispatched' })
  dispatchMany(@Body() body: BulkDispatchDto): Promise<BulkDispatchView> {
    return this.bulk.dispatch(body.runIds);
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a run, with the tail of its output' })
  @ApiOkResponse({ description: 'The run', type: RunView })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such run' })
  get(@Param('id', ParseUUIDPipe) id: string): Promise<RunView> {
    return this.runs.get(id);
  }

  @Get(':id/events')
  @ApiOperation({ summary: 'List every transition of a run, in order' })
  @ApiOkResponse({ description: 'Every transition of the run, in order', type: RunEventList })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such run' })
  events(@Param('id', ParseUUIDPipe) id: string): Promise<RunEventList> {
    return this.runs.events(id);
  }

  @Get(':id/steps')
  @ApiOperation({ summary: "List a run's steps (onceflow step), in order of first start" })
  @ApiOkResponse({ description: 'The step journal of the run', type: RunStepList })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such run' })
  steps(@Param('id', ParseUUIDPipe) id: string): Promise<RunStepList> {
    return this.runs.steps(id);
  }

  @Post(':id/dispatch')
  @HttpCode(202)
  @ApiOperation({ summary: 'Queue a PENDING run' })
  @ApiAcceptedResponse({ description: 'The run is QUEUED', type: DispatchView })
  @ApiErrors({
    400: 'The id is not a UUID',
    404: 'No such run',
    409: 'Already queued, running, retrying or succeeded, or a dispatch is in progress (message says which)',
  })
  dispatch(@Param('id', ParseUUIDPipe) id: string): Promise<DispatchView> {
    return this.dispatcher.dispatch(id);
  }

  @Post(':id/retry')
  @HttpCode(202)
  @ApiOperation({ summary: 'Queue a FAILED run for a new attempt series' })
  @ApiAcceptedResponse({ description: 'The run is QUEUED again, attempts start from zero', type: DispatchView })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such run', 409: 'The run is not FAILED' })
  retry(@Param('id', ParseUUIDPipe) id: string): Promise<DispatchView> {
    return this.dispatcher.retry(id);
  }

  @Post(':id/cancel')
  @HttpCode(202)
  @ApiOperation({ summary: 'Cancel a run that has not finished' })
  @ApiAcceptedResponse({
    description: 'The run, CANCELLED; a running command is killed within one heartbeat',
    type: RunView,
  })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such run', 409: 'The run already finished' })
  cancel(@Param('id', ParseUUIDPipe) id: string): Promise<RunView> {
    return this.runs.cancel(id);
  }
}
