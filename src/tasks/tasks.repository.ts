import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { DataSource, EntityManager } from 'typeorm';
import { bindNamed, mergeValues, NamedStatement } from '../database/named-params';
import { PgStatements } from '../database/pg-statements';
import type { RunRow } from '../runs/run-transitions.repository';
import { RunKind } from '../runs/run-status';
import { TaskStatus } from './task.entity';
import { TASK_SELECT, TaskRow } from './task.view';

export interface ExternalProjectRef {
  provider: string;
  externalId: string;
  /** Display name on first sight; a clash with an unrelated project's name gets the id appended. */
  name: string;
  maxConcurrentRuns: number;
}

/**
 * The insert of a project seen for the first time; $1–$6 are `externalProjectParams`. Skipped
 * outright when the project is already visible (the usual case), so a known project costs an
 * index probe, not a speculative insert. `ON CONFLICT DO NOTHING` without a target: EVERY unique
 * index is an arbiter, `uq_projects_name` too. With only `ux_projects_external_ref` as arbiter, a
 * concurrent creator whose name entry went in before its external-ref entry (or an unrelated
 * project of the same name committed meanwhile) made the insert fail with 23505 on the name: a
 * failed delivery (seen under load in `webhooks-idempotency`). A name clash now inserts nothing;
 * `ensureProject` then tries again, and the CASE gives the new project a distinct name.
 */
const EXTERNAL_PROJECT_INSERT = `INSERT INTO projects (id, name, workspace_path, max_concurrent_runs, external_provider, external_id)
     SELECT $1::uuid,
            CASE WHEN EXISTS (SELECT 1 FROM projects WHERE name = $2::text) THEN $2::text || ' (' || $1::text || ')' ELSE $2::text END,
            $3, $4, $5, $6
      WHERE NOT EXISTS (SELECT 1 FROM projects WHERE external_provider = $5 AND external_id = $6)
     ON CONFLICT DO NOTHING
     RETURNING id`;

function externalProjectParams(workspaceRoot: string, ref: ExternalProjectRef): unknown[] {
  const id = randomUUID();
  return [id, ref.name, join(workspaceRoot, id), ref.maxConcurrentRuns, ref.provider, ref.externalId];
}

/** A task's fields as an external work item gives them: [external id, url, title, metadata]. */
export type TaskFields = [externalId: string, url: string | null, title: string, metadata: Record<string, unknown>];

/** Projects remembered per process; past this many the memo starts over (projects are few). */
const PROJECT_MEMO_MAX = 10_000;

const TASK_INSERT_CONFLICT = `ON CONFLICT (external_provider, external_id)
  WHERE external_provider IS NOT NULL AND external_id IS NOT NULL DO NOTHING`;

/** The statements on `tasks` and on the projects that external work items bring along. */
@Injectable()
export class TasksRepository {
  /**
   * External project → onceflow project id, as read from Postgres. The pair never changes once
   * written and projects are never deleted, so a remembered id stays right; the memo saves every
   * new item a round trip. Should a row vanish anyway, `forgetProjectId` lets the caller ask again.
   */
  private readonly projectIds = new Map<string, string>();

  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly statements: PgStatements,
  ) {}

  /** The onceflow project of an external project, if it has been seen (remembered once read). */
  async projectIdOf(provider: string, externalId: string): Promise<string | null> {
    const key = `${provider}\0${externalId}`;
    const known = this.projectIds.get(key);
    if (known) return known;
    const rows = await this.statements.preparedRows<{ id: string }>(
      'SELECT id FROM projects WHERE external_provider = $1 AND external_id = $2',
      [provider, externalId],
    );
    const id = rows[0]?.id ?? null;
    if (id) {
      if (this.projectIds.size >= PROJECT_MEMO_MAX) this.projectIds.clear();
      this.projectIds.set(key, id);
    }
    return id;
  }

  /** Drops a remembered project id, if it is still `id` (a concurrent caller may have read the new one). */
  forgetProjectId(provider: string, externalId: string, id: string): void {
    const key = `${provider}\0${externalId}`;
    if (this.projectIds.get(key) === id) this.projectIds.delete(key);
  }

  /**
   * The task (its id chosen by the caller) and, in the same statement, what `run` (RunsService's
   * CTEs over `task`) and `also` (the caller's CTE over `run`) write for it; answers the new run,
   * or null when the item already has its task (or the project is gone), and then nothing is
   * written. Outside a transaction it is prepared: one autocommit statement, which the 26000
   * fallback may send again because a missing prepared statement means nothing ran.
   */
  async insertWithRun(
    t: { id: string; projectId: string; provider: string; fields: TaskFields },
    run: NamedStatement,
    also?: NamedStatement,
    em?: EntityManager,
  ): Promise<RunRow | null> {
    const [externalId, url, title, metadata] = t.fields;
    const { text, values } = bindNamed(
      `WITH task AS (
         INSERT INTO tasks (id, project_id, external_provider, external_id, url, title, metadata)
         SELECT :taskId::uuid, p.id, :provider::text, :externalId::text, :url::text, :title::text, :metadata::jsonb
           FROM projects p WHERE p.id = :projectId::uuid
         ${TASK_INSERT_CONFLICT}
         RETURNING id, project_id
       ), ${run.text}${also ? `, ${also.text}` : ''}
       SELECT run.*, NULL::text AS from_status FROM run`,
      mergeValues(
        { taskId: t.id, projectId: t.projectId, provider: t.provider, externalId, url, title, metadata },
        run.values,
        also?.values,
      ),
    );
    const rows: RunRow[] = em ? await em.query(text, values) : await this.statements.preparedRows(text, values);
    return rows[0] ?? null;
  }

  /**
   * The onceflow project for an external project, created on first sight. Idempotent across
   * replicas: the insert yields to `ux_projects_external_ref` (a concurrent creator's row wins, we
   * wait for its commit and then read it). Runs in the caller's transaction.
   */
  async ensureProject(em: EntityManager, workspaceRoot: string, ref: ExternalProjectRef): Promise<{ id: string }> {
    // Twice at most: the second insert sees the committed name that made the first one yield.
    for (let attempt = 1; ; attempt++) {
      const inserted: Array<{ id: string }> = await em.query(
        EXTERNAL_PROJECT_INSERT,
        externalProjectParams(workspaceRoot, ref),
      );
      if (inserted[0]) return inserted[0];
      // A new statement: under READ COMMITTED it sees the row whose commit the insert waited for.
      const existing: Array<{ id: string }> = await em.query(
        'SELECT id FROM projects WHERE external_provider = $1 AND external_id = $2',
        [ref.provider, ref.externalId],
      );
      if (existing[0]) return existing[0];
      if (attempt === 2) throw new Error(`project ${ref.provider}:${ref.externalId} neither inserted nor found`);
    }
  }

  /**
   * The item's task and authoring run, if it has them, and in the same statement (one round trip)
   * the refresh (prepared: a known item's `updated` deliveries are most of Plane's traffic): title
   * and metadata follow the newest event. Deliveries arrive out of order and carry the item as it
   * was when the sender's job ran, so an older `updatedAt` never overwrites a newer one, and an
   * event without one refreshes nothing.
   */
  async findAndRefresh(
    provider: string,
    [externalId, url, title, metadata]: TaskFields,
    updatedAt: string | null,
  ): Promise<{ taskId: string; runId: string | null } | null> {
    const rows = await this.statements.preparedRows<{ id: string; run_id: string | null }>(
      `WITH task AS (SELECT id FROM tasks WHERE external_provider = $1 AND external_id = $2),
       refreshed AS (
         UPDATE tasks SET title = $4, url = COALESCE($5, url), metadata = $6, updated_at = now()
          WHERE id = (SELECT id FROM task) AND status = $8 AND $7::timestamptz IS NOT NULL
            AND (metadata->>'updatedAt' IS NULL OR (metadata->>'updatedAt')::timestamptz < $7::timestamptz)
       )
       SELECT task.id, r.id AS run_id FROM task LEFT JOIN runs r ON r.task_id = task.id AND r.kind = $3`,
      [provider, externalId, RunKind.AUTHORING, title, url, metadata, updatedAt, TaskStatus.OPEN],
    );
    return rows[0] ? { taskId: rows[0].id, runId: rows[0].run_id } : null;
  }

  /** Locks the task of an external item (to commit) and returns its id; null: no such task. */
  async lockByExternalRef(em: EntityManager, provider: string, externalId: string): Promise<string | null> {
    const tasks: Array<{ id: string }> = await em.query(
      'SELECT id FROM tasks WHERE external_provider = $1 AND external_id = $2 FOR UPDATE',
      [provider, externalId],
    );
    return tasks[0]?.id ?? null;
  }

  async markCancelled(em: EntityManager, taskId: string): Promise<void> {
    await em.query(`UPDATE tasks SET status = $2, updated_at = now() WHERE id = $1 AND status <> $2`, [
      taskId,
      TaskStatus.CANCELLED,
    ]);
  }

  async authoringRunId(em: EntityManager, taskId: string): Promise<string | null> {
    const runs: Array<{ id: string }> = await em.query(`SELECT id FROM runs WHERE task_id = $1 AND kind = $2`, [
      taskId,
      RunKind.AUTHORING,
    ]);
    return runs[0]?.id ?? null;
  }

  /** Newest first, at most `limit`. */
  async list(q: { provider?: string; externalId?: string; limit: number }): Promise<TaskRow[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (q.provider) where.push(`t.external_provider = $${params.push(q.provider)}`);
    if (q.externalId) where.push(`t.external_id = $${params.push(q.externalId)}`);
    return this.ds.query(
      `${TASK_SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY t.created_at DESC, t.id DESC LIMIT $${params.push(q.limit)}`,
      params,
    );
  }

  async findById(id: string): Promise<TaskRow | null> {
    const rows: TaskRow[] = await this.ds.query(`${TASK_SELECT} WHERE t.id = $1`, [id]);
    return rows[0] ?? null;
  }
}
