import { Controller, Get, HttpCode, Param, ParseUUIDPipe, Post, Query, UseGuards } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBearerAuth, ApiConflictResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard } from '../common/api-key.guard';
import { DispatchAnswer, DispatchService } from './dispatch.service';
import { ListRunsQuery } from './dto/list-runs.query';
import { RunEventView, RunStepView, RunsService } from './runs.service';
import { RunView } from './run.view';

@ApiTags('runs')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('api/runs')
export class RunsController {
  constructor(
    private readonly runs: RunsService,
    private readonly dispatcher: DispatchService,
  ) {}

  @Get()
  @ApiOkResponse({ description: '{ items, nextCursor }, newest first' })
  list(@Query() q: ListRunsQuery): Promise<{ items: RunView[]; nextCursor: string | null }> {
    return this.runs.list({ projectId: q.projectId, status: q.status, cursor: q.cursor, limit: q.limit ?? 50 });
  }

  @Get(':id')
  @ApiOkResponse({ description: 'The run' })
  get(@Param('id', ParseUUIDPipe) id: string): Promise<RunView> {
    return this.runs.get(id);
  }

  @Get(':id/events')
  @ApiOkResponse({ description: 'Every transition of the run, in order' })
  events(@Param('id', ParseUUIDPipe) id: string): Promise<{ items: RunEventView[] }> {
    return this.runs.events(id);
  }

  @Get(':id/steps')
  @ApiOkResponse({ description: "The run's step journal (onceflow step), in order of first start" })
  steps(@Param('id', ParseUUIDPipe) id: string): Promise<{ items: RunStepView[] }> {
    return this.runs.steps(id);
  }

  @Post(':id/dispatch')
  @HttpCode(202)
  @ApiAcceptedResponse({ description: '{ runId, status: "QUEUED", jobId }' })
  @ApiConflictResponse({ description: 'Already queued, running, retrying or succeeded (message says which)' })
  dispatch(@Param('id', ParseUUIDPipe) id: string): Promise<DispatchAnswer> {
    return this.dispatcher.dispatch(id);
  }

  @Post(':id/retry')
  @HttpCode(202)
  @ApiAcceptedResponse({ description: 'A FAILED run queued for a new attempt series' })
  @ApiConflictResponse({ description: 'The run is not FAILED' })
  retry(@Param('id', ParseUUIDPipe) id: string): Promise<DispatchAnswer> {
    return this.dispatcher.retry(id);
  }

  @Post(':id/cancel')
  @HttpCode(202)
  @ApiAcceptedResponse({ description: 'The run, CANCELLED; a running command is killed within one heartbeat' })
  @ApiConflictResponse({ description: 'The run already finished' })
  cancel(@Param('id', ParseUUIDPipe) id: string): Promise<RunView> {
    return this.runs.cancel(id);
  }
}
