import { Body, Controller, Get, Headers, HttpCode, Param, ParseUUIDPipe, Post, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiConflictResponse, ApiCreatedResponse, ApiHeader, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiKeyGuard } from '../common/api-key.guard';
import { DomainError } from '../common/domain-error';
import { CreateProjectDto } from './dto/create-project.dto';
import { CreateRunDto } from './dto/create-run.dto';
import { ProjectEntity } from './entities/project.entity';
import { fingerprint, IdempotencyService } from './idempotency.service';
import { ProjectsService } from './projects.service';
import { RunRow } from './run-transitions.repository';
import { RunView, toRunView } from './run.view';
import { RunsService } from './runs.service';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

@ApiTags('projects')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('api/projects')
export class ProjectsController {
  constructor(
    private readonly projects: ProjectsService,
    private readonly runs: RunsService,
    private readonly idempotency: IdempotencyService,
  ) {}

  @Post()
  @ApiCreatedResponse({ description: 'The project' })
  @ApiConflictResponse({ description: 'A project with this name exists' })
  create(@Body() dto: CreateProjectDto): Promise<ProjectEntity> {
    return this.projects.create(dto);
  }

  @Get(':id')
  @ApiOkResponse({ description: 'The project' })
  get(@Param('id', ParseUUIDPipe) id: string): Promise<ProjectEntity> {
    return this.projects.get(id);
  }

  @Post(':id/runs')
  @HttpCode(201)
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description: 'Replays the first answer for 24 h; 422 with another body, 409 while in flight',
  })
  @ApiCreatedResponse({ description: 'The run: PENDING, or QUEUED with dispatch: true' })
  async createRun(
    @Param('id', ParseUUIDPipe) projectId: string,
    @Body() dto: CreateRunDto,
    @Headers('idempotency-key') key: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ): Promise<RunView> {
    const input = { projectId, requirement: dto.requirement, dispatch: dto.dispatch ?? false };
    if (key === undefined) return this.runs.create(input);
    if (!KEY_PATTERN.test(key)) throw new DomainError(400, 'Bad Request', 'Idempotency-Key must be 1-255 visible ASCII characters');
    const print = fingerprint('POST', `/api/projects/${projectId}/runs`, { requirement: input.requirement, dispatch: input.dispatch });
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
