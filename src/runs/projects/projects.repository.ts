import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { afterCursor, CREATED_US } from '../../common/cursor';
import { ProjectEntity } from '../entities/project.entity';
import type { toProjectView } from './project.view';

export type ProjectRow = Parameters<typeof toProjectView>[0];

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

/** The entity's fields under their property names, so one `toProjectView` serves rows and entities. */
const PROJECT_COLUMNS = `id, name, workspace_path AS "workspacePath", max_concurrent_runs AS "maxConcurrentRuns",
  external_provider AS "externalProvider", external_id AS "externalId", created_at AS "createdAt", updated_at AS "updatedAt"`;

/** The statements on `projects`: ids, the workspace claim, inserts and reads. */
@Injectable()
export class ProjectsRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  /** A fresh id, known before the insert: the default workspace is named after it. */
  async newId(em: EntityManager): Promise<string> {
    const rows: Array<{ id: string }> = await em.query('SELECT gen_random_uuid() AS id');
    return rows[0].id;
  }

  /**
   * In the caller's transaction: takes the workspace-claim lock (held to commit), then names a
   * project whose workspace overlaps `path`, if one does. `tasksRoot` is `<root>/`.
   */
  async lockAndFindOverlap(em: EntityManager, path: string, tasksRoot: string): Promise<string | null> {
    await em.query('SELECT pg_advisory_xact_lock($1)', [WORKSPACE_CLAIM_LOCK]);
    const taken: Array<{ id: string }> = await em.query(OVERLAPPING_PROJECT, [path, tasksRoot]);
    return taken[0]?.id ?? null;
  }

  async insert(em: EntityManager, fields: Omit<ProjectEntity, 'createdAt' | 'updatedAt'>): Promise<ProjectEntity> {
    const repo = em.getRepository(ProjectEntity);
    return repo.save(repo.create(fields));
  }

  async findById(id: string): Promise<ProjectEntity | null> {
    return this.ds.getRepository(ProjectEntity).findOneBy({ id });
  }

  /** Newest first, `limit + 1` rows after the cursor (keyset on created_at, id). */
  async page(limit: number, cursor?: string): Promise<Array<ProjectRow & { created_us: string }>> {
    const params: unknown[] = [];
    const where = cursor ? `WHERE ${afterCursor(cursor, params)}` : '';
    return this.ds.query(
      `SELECT ${PROJECT_COLUMNS}, ${CREATED_US} FROM projects ${where} ORDER BY created_at DESC, id DESC LIMIT $${params.push(limit + 1)}`,
      params,
    );
  }
}
