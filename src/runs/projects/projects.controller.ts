import { Body, Controller, Get, Headers, HttpCode, Param, ParseUUIDPipe, Post, Query, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { RequireApiKey } from '../../common/api-key.guard';
import { IdempotencyError, IdempotencyErrorCode } from '../idempotency/idempotency.errors';
import { ApiErrors } from '../../common/openapi';
import { PageQuery } from '../../common/page.query';
import { CreateProjectDto } from './create-project.dto';
import { CreateRunDto } from '../dto/create-run.dto';
import { fingerprint, IdempotencyService } from '../idempotency/idempotency.service';
import { ProjectPage, ProjectView, toProjectView } from './project.view';
import { ProjectsService } from './projects.service';
import { RunRow } from '../run-transitions.repository';
import { RunView, toRunView } from '../run.view';
import { RunsService } from '../runs.service';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

@ApiTags('projects')
@RequireApiKey()
@Controller('api/projects')
export class ProjectsController {
  constructor(
    private readonly projects: ProjectsService,
    private readonly runs: RunsService,
    private readonly idempotency: IdempotencyService,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Create a project' })
  @ApiCreatedResponse({ description: 'The project', type: ProjectView })
  @ApiErrors({ 400: 'Invalid body', 409: 'A project with this name exists' })
  async create(@Body() dto: CreateProjectDto): Promise<ProjectView> {
    return toProjectView(await this.projects.create(dto));
  }

  @Get()
  @ApiOperation({ summary: 'List projects, newest first' })
  @ApiOkResponse({ description: 'A page of projects', type: ProjectPage })
  @ApiErrors({ 400: 'Invalid limit or cursor' })
  list(@Query() q: PageQuery): Promise<ProjectPage> {
    return this.projects.list({ cursor: q.cursor, limit: q.limit ?? 50 });
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a project' })
  @ApiOkResponse({ description: 'The project', type: ProjectView })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such project' })
  async get(@Param('id', ParseUUIDPipe) id: string): Promise<ProjectView> {
    return toProjectView(await this.projects.get(id));
  }

  @Post(':id/runs')
  @HttpCode(201)
  @ApiOperation({ summary: 'Create a run in a project (dispatched at once with dispatch: true)' })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description: 'Replays the first answer for 24 h; 422 with another body, 409 while in flight',
  })
  @ApiCreatedResponse({
    description: 'The run: PENDING, or QUEUED with dispatch: true (a replay carries Idempotent-Replayed: true)',
    type: RunView,
    headers: {
      'Idempotent-Replayed': {
        description: '"true" when this is the stored answer of an earlier request',
        schema: { type: 'string' },
      },
    },
  })
  @ApiErrors({
    400: 'Invalid id, body or Idempotency-Key',
    404: 'No such project',
    409: 'A request with this Idempotency-Key is still in flight (Retry-After: 1)',
    422: 'This Idempotency-Key was used with another body',
  })
  async createRun(
    @Param('id', ParseUUIDPipe) projectId: string,
    @Body() dto: CreateRunDto,
    @Headers('idempotency-key') key: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ): Promise<RunView> {
    const input = { projectId, requirement: dto.requirement, dispatch: dto.dispatch ?? false };
    if (key === undefined) return this.runs.create(input);
    if (!KEY_PATTERN.test(key))
      throw new IdempotencyError(
        IdempotencyErrorCode.KEY_INVALID,
        'Idempotency-Key must be 1-255 visible ASCII characters',
      );
    const print = fingerprint('POST', `/api/projects/${projectId}/runs`, {
      requirement: input.requirement,
      dispatch: input.dispatch,
    });
    const answer = await this.idempotency.execute<RunRow>(key, print, async (em) => {
      const run = await this.runs.createInTx(em, input);
      return { status: 201, body: toRunView(run), after: run };
    });
    if (answer.after) await this.runs.enqueueAfterCommit(answer.after);
    if (answer.replayed) res.setHeader('Idempotent-Replayed', 'true');
    res.status(answer.status);
    return answer.body as RunView;
  }
}
