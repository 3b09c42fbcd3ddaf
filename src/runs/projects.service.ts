import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DataSource, EntityManager } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { projectNotFound, RunsError, RunsErrorCode } from './runs.errors';
import { pgConstraint, pgErrorCode } from '../database/pg-errors';
import { ProjectEntity, UQ_PROJECTS_NAME } from './entities/project.entity';
import { confineToRoot } from './workspace-path';
import { afterCursor, CREATED_US, toPage } from '../common/cursor';
import { ProjectPage, toProjectView } from './project.view';

export interface NewProject {
  name: string;
  workspacePath?: string;
  maxConcurrentRuns?: number;
  externalProvider?: string;
  externalId?: string;
}

/**
 * Serialises the creates that choose their own workspace, so two of them with nested paths
 * cannot both pass the overlap check. Held to commit. A default workspace needs no lock: its
 * `<root>/<new id>` cannot be known, let alone claimed, before the insert commits.
 */
const WORKSPACE_CLAIM_LOCK = 7_319_004_212;

/**
 * A project that owns part of $1 (the requested path, `<root>/…`): the same path, one inside the
 * other, or $1 meeting `<root>/<its id>`, where its task workspaces live even when its own
 * workspace is elsewhere. $2 is `<root>/`. rtrim: a row stored as `/` still contains everything.
 */
const OVERLAPPING_PROJECT = `
  SELECT id FROM projects p,
    LATERAL (SELECT rtrim(p.workspace_path, '/') || '/' AS own, $2 || p.id::text || '/' AS tasks) d
  WHERE starts_with(d.own, $1 || '/') OR starts_with($1 || '/', d.own)
     OR starts_with(d.tasks, $1 || '/') OR starts_with($1 || '/', d.tasks)
  LIMIT 1`;
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
        // Made now, by us: a project-level run's command will own <root>/<id> and could not make
        // it later — nor must it be able to decide what `tasks` is.
        await mkdir(join(this.config.workspaceRoot, project.id, 'tasks'), { recursive: true });
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
    const repo = em.getRepository(ProjectEntity);
    const id = (await em.query('SELECT gen_random_uuid() AS id'))[0].id as string;
    const project = repo.create({
      id,
      name: input.name,
      workspacePath: workspacePath ?? join(this.config.workspaceRoot, id),
      maxConcurrentRuns: input.maxConcurrentRuns ?? 1,
      externalProvider: input.externalProvider ?? null,
      externalId: input.externalId ?? null,
    });
    return repo.save(project);
  }

  /**
   * The requested workspace, resolved inside WORKSPACE_ROOT and belonging to no other project.
   * An API key must not be able to point commands at `/`, the service's home or another
   * project's files; 400 otherwise, before anything is written.
   */
  private async claimWorkspace(em: EntityManager, requested: string): Promise<string> {
    const root = this.config.workspaceRoot;
    const path = await confineToRoot(root, requested);
    await em.query('SELECT pg_advisory_xact_lock($1)', [WORKSPACE_CLAIM_LOCK]);
    const taken: Array<{ id: string }> = await em.query(OVERLAPPING_PROJECT, [path, join(root, '/')]);
    if (taken.length > 0) {
      throw new RunsError(
        RunsErrorCode.WORKSPACE_OVERLAPS,
        `workspacePath overlaps the workspace of project ${taken[0].id}`,
      );
    }
    return path;
  }

  async get(id: string): Promise<ProjectEntity> {
    const project = await this.ds.getRepository(ProjectEntity).findOneBy({ id });
    if (!project) throw projectNotFound(id);
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
