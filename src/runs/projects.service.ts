import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DataSource, EntityManager } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { afterCursor, CREATED_US, toPage } from '../common/cursor';
import { conflict, notFound } from '../common/domain-error';
import { pgConstraint, pgErrorCode } from '../database/transaction';
import { ProjectEntity, UQ_PROJECTS_NAME } from './entities/project.entity';
import { ProjectPage, toProjectView } from './project.view';

export interface NewProject {
  name: string;
  workspacePath?: string;
  maxConcurrentRuns?: number;
  externalProvider?: string;
  externalId?: string;
}

type ProjectRow = Parameters<typeof toProjectView>[0];

/** The entity's fields under their property names, so one `toProjectView` serves rows and entities. */
const PROJECT_COLUMNS = `id, name, workspace_path AS "workspacePath", max_concurrent_runs AS "maxConcurrentRuns",
  external_provider AS "externalProvider", external_id AS "externalId", created_at AS "createdAt", updated_at AS "updatedAt"`;

@Injectable()
export class ProjectsService {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async create(input: NewProject): Promise<ProjectEntity> {
    try {
      return await this.ds.transaction(async (em) => {
        const project = await this.insert(em, input);
        await mkdir(project.workspacePath, { recursive: true });
        return project;
      });
    } catch (err) {
      if (pgErrorCode(err) === '23505' && pgConstraint(err) === UQ_PROJECTS_NAME) {
        throw conflict(`a project named "${input.name}" already exists`);
      }
      throw err;
    }
  }

  /** Inserts in the caller's transaction; the workspace defaults to <WORKSPACE_ROOT>/<project id>. */
  async insert(em: EntityManager, input: NewProject): Promise<ProjectEntity> {
    const repo = em.getRepository(ProjectEntity);
    const id = (await em.query('SELECT gen_random_uuid() AS id'))[0].id as string;
    const project = repo.create({
      id,
      name: input.name,
      workspacePath: input.workspacePath ? resolve(input.workspacePath) : join(this.config.workspaceRoot, id),
      maxConcurrentRuns: input.maxConcurrentRuns ?? 1,
      externalProvider: input.externalProvider ?? null,
      externalId: input.externalId ?? null,
    });
    return repo.save(project);
  }

  async get(id: string): Promise<ProjectEntity> {
    const project = await this.ds.getRepository(ProjectEntity).findOneBy({ id });
    if (!project) throw notFound('project', id);
    return project;
  }

  /** Newest first, paginated like `GET /api/runs` (keyset on created_at, id). */
  async list(q: { limit: number; cursor?: string }): Promise<ProjectPage> {
    const params: unknown[] = [];
    const where = q.cursor ? `WHERE ${afterCursor(q.cursor, params)}` : '';
    const rows: Array<ProjectRow & { created_us: string }> = await this.ds.query(
      `SELECT ${PROJECT_COLUMNS}, ${CREATED_US} FROM projects ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.push(q.limit + 1)}`,
      params,
    );
    return toPage(rows, q.limit, toProjectView);
  }
}
