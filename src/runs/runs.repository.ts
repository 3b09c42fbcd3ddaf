import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { afterCursor, CREATED_US } from '../common/cursor';
import { bindNamed, mergeValues, NamedStatement } from '../database/named-params';
import { PgStatements } from '../database/pg-statements';
import { RunKind, RunStatus } from './run-status';
import { RunRow } from './run-transitions.repository';

export interface RunInsert {
  projectId: string;
  taskId: string | null;
  kind: RunKind;
  requirement: string;
  status: RunStatus.PENDING | RunStatus.QUEUED;
  dispatchGeneration: number;
}

export interface RunEventRow {
  from_status: RunStatus | null;
  to_status: RunStatus;
  at: Date;
  attempt: number;
  fencing_token: string;
  worker_id: string | null;
  reason: string | null;
}

/** The API's statements on `runs` and `run_events`: insert and reads. Transitions live in RunTransitionsRepository. */
@Injectable()
export class RunsRepository {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly statements: PgStatements,
  ) {}

  /** In the caller's transaction; null when the project does not exist (nothing inserted). */
  async insert(em: EntityManager, r: RunInsert): Promise<RunRow | null> {
    const rows: RunRow[] = await em.query(
      `INSERT INTO runs (project_id, task_id, kind, requirement, status, dispatch_generation)
       SELECT p.id, $2, $3, $4, $5, $6 FROM projects p WHERE p.id = $1
       RETURNING *, NULL::text AS from_status`,
      [r.projectId, r.taskId, r.kind, r.requirement, r.status, r.dispatchGeneration],
    );
    return rows[0] ?? null;
  }

  /**
   * insert() and its creation event in ONE autocommitted, prepared statement (no transaction held
   * open between round trips, so the project row's key-share lock is held for one statement only);
   * null when the project does not exist (nothing inserted).
   */
  async insertWithEvent(r: RunInsert, event: { workerId: string | null; reason: string }): Promise<RunRow | null> {
    const cte = this.creationCte('p', r, event);
    const { text, values } = bindNamed(
      `WITH p AS (SELECT id AS project_id, :runTaskId::uuid AS id FROM projects WHERE id = :runProjectId::uuid),
       ${cte.text}
       SELECT *, NULL::text AS from_status FROM run`,
      mergeValues({ runProjectId: r.projectId, runTaskId: r.taskId }, cte.values),
    );
    const rows = await this.statements.preparedRows<RunRow>(text, values);
    return rows[0] ?? null;
  }

  /**
   * insert() and its creation event as the data-modifying CTEs `run` and `run_created`, for a
   * statement in which `source` yields the new task as `id` and `project_id` (nothing: no run).
   * One round trip where insert() and RunTransitionsRepository.recordCreated() take two. The
   * values are named `run*`, so they cannot collide with the statement's own.
   */
  creationCte(
    source: string,
    r: Omit<RunInsert, 'projectId' | 'taskId'>,
    event: { workerId: string | null; reason: string },
  ): NamedStatement {
    const text = `run AS (
        INSERT INTO runs (project_id, task_id, kind, requirement, status, dispatch_generation)
        SELECT ${source}.project_id, ${source}.id, :runKind::text, :runRequirement::text, :runStatus::text, :runGeneration::int
          FROM ${source}
        RETURNING *
      ),
      run_created AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT run.id, NULL, run.status, 0, 0, :runWorkerId::text, :runReason::text FROM run
      )`;
    const values = {
      runKind: r.kind,
      runRequirement: r.requirement,
      runStatus: r.status,
      runGeneration: r.dispatchGeneration,
      runWorkerId: event.workerId,
      runReason: event.reason,
    };
    return { text, values };
  }

  async findById(id: string): Promise<RunRow | null> {
    const rows: RunRow[] = await this.ds.query('SELECT * FROM runs WHERE id = $1', [id]);
    return rows[0] ?? null;
  }

  /** Just the status (a refused dispatch explains itself; the row may carry a 64 KiB output tail). */
  async statusOf(id: string): Promise<RunStatus | null> {
    const rows: Array<{ status: RunStatus }> = await this.ds.query('SELECT status FROM runs WHERE id = $1', [id]);
    return rows[0]?.status ?? null;
  }

  /** The status of each of `ids` that exists (a bulk dispatch explains its refusals). */
  async statusesOf(ids: readonly string[]): Promise<Map<string, RunStatus>> {
    const rows: Array<{ id: string; status: RunStatus }> = await this.ds.query(
      'SELECT id, status FROM runs WHERE id = ANY($1::uuid[])',
      [ids],
    );
    return new Map(rows.map((r) => [r.id, r.status]));
  }

  /** Newest first, `limit + 1` rows after the cursor (keyset on created_at, id). */
  async page(q: {
    projectId?: string;
    status?: RunStatus;
    limit: number;
    cursor?: string;
  }): Promise<Array<RunRow & { created_us: string }>> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (q.projectId) where.push(`project_id = $${params.push(q.projectId)}`);
    if (q.status) where.push(`status = $${params.push(q.status)}`);
    if (q.cursor) where.push(afterCursor(q.cursor, params));
    const sql = `SELECT *, ${CREATED_US} FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
                 ORDER BY created_at DESC, id DESC LIMIT $${params.push(q.limit + 1)}`;
    return this.ds.query(sql, params);
  }

  async events(runId: string): Promise<RunEventRow[]> {
    return this.ds.query('SELECT * FROM run_events WHERE run_id = $1 ORDER BY id', [runId]);
  }
}
