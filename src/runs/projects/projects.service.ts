import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DataSource, EntityManager } from 'typeorm';
import { toPage } from '../../common/cursor';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { pgConstraint, pgErrorCode } from '../../database/pg-errors';
import { ProjectEntity, UQ_PROJECTS_NAME } from '../entities/project.entity';
import { projectNotFound, RunsError, RunsErrorCode } from '../runs.errors';
import { confineToRoot } from '../workspace-path';
import { ProjectPage, toProjectView } from './project.view';
import { ProjectsRepository } from './projects.repository';

export interface NewProject {
  name: string;
  workspacePath?: string;
  maxConcurrentRuns?: number;
  externalProvider?: string;
  externalId?: string;
}

@Injectable()
export class ProjectsService {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly projects: ProjectsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async create(input: NewProject): Promise<ProjectEntity> {
    try {
      return await this.ds.transaction(async (em) => {
        const project = await this.insert(em, input);
        await mkdir(project.workspacePath, { recursive: true });
        // Made now, by us: a project-level run's command will own <root>/<id> and could not make
        // it later — nor must it be able to decide what `tasks` is.
        await mkdir(join(this.config.runs.workspaceRoot, project.id, 'tasks'), { recursive: true });
        return project;
      });
    } catch (err) {
      if (pgErrorCode(err) === '23505' && pgConstraint(err) === UQ_PROJECTS_NAME) {
        throw new RunsError(RunsErrorCode.PROJECT_NAME_TAKEN, `a project named "${input.name}" already exists`);
      }
      throw err;
    }
  }

  /** Inserts in the caller's transaction; the workspace defaults to <WORKSPACE_ROOT>/<project id>. */
  async insert(em: EntityManager, input: NewProject): Promise<ProjectEntity> {
    const workspacePath = input.workspacePath ? await this.claimWorkspace(em, input.workspacePath) : null;
    const id = await this.projects.newId(em);
    return this.projects.insert(em, {
      id,
      name: input.name,
      workspacePath: workspacePath ?? join(this.config.runs.workspaceRoot, id),
      maxConcurrentRuns: input.maxConcurrentRuns ?? 1,
      externalProvider: input.externalProvider ?? null,
      externalId: input.externalId ?? null,
    });
  }

  /**
   * The requested workspace, resolved inside WORKSPACE_ROOT and belonging to no other project.
   * An API key must not be able to point commands at `/`, the service's home or another
   * project's files; 400 otherwise, before anything is written.
   */
  private async claimWorkspace(em: EntityManager, requested: string): Promise<string> {
    const root = this.config.runs.workspaceRoot;
    const path = await confineToRoot(root, requested);
    const taken = await this.projects.lockAndFindOverlap(em, path, join(root, '/'));
    if (taken) {
      throw new RunsError(RunsErrorCode.WORKSPACE_OVERLAPS, `workspacePath overlaps the workspace of project ${taken}`);
    }
    return path;
  }

  async get(id: string): Promise<ProjectEntity> {
    const project = await this.projects.findById(id);
    if (!project) throw projectNotFound(id);
    return project;
  }

  /** Newest first, paginated like `GET /api/runs` (keyset on created_at, id). */
  async list(q: { limit: number; cursor?: string }): Promise<ProjectPage> {
    return toPage(await this.projects.page(q.limit, q.cursor), q.limit, toProjectView);
  }
}
