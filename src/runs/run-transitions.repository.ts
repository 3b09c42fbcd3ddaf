import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { bindNamed, mergeValues, NamedStatement, Statement } from '../database/named-params';
import { PgStatements } from '../database/pg-statements';
import { MetricsService } from '../metrics/metrics.service';
import { assertTransitions } from './run-state-machine';
import { RunStatus } from './run-status';

/** A run row as the transition statements return it (snake_case, straight from Postgres). */
export interface RunRow {
  id: string;
  project_id: string;
  task_id: string | null;
  kind: string;
  requirement: string;
  status: RunStatus;
  attempts: number;
  fencing_token: string;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  dispatch_generation: number;
  last_error: string | null;
  output_tail: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
  from_status: RunStatus;
}

export interface TransitionSpec {
  to: RunStatus;
  /** Statuses the run must be in; each must be allowed by the state machine. */
  from: readonly RunStatus[];
  /** Only the holder of this fencing token may make the transition. */
  fencingToken?: string;
  /** Extra assignments, SQL expressions over `r`; `:name` placeholders take `values.name`. */
  set?: string[];
  /** An extra condition on `r` (same placeholders). */
  where?: string;
  values?: Record<string, unknown>;
  workerId?: string | null;
  reason?: string | null;
  /**
   * Further CTEs of the same statement over `upd` (the updated row, present only when the
   * transition happened), e.g. the outbox row, with their own `:name` values.
   */
  with?: NamedStatement;
  /** Extra output columns (`, (SELECT id FROM outbox) AS notification_id`) and joins to `upd`. */
  output?: { columns: string; join?: string };
}

export type { Statement };

// The names the statement itself binds; a spec's own values must use others.
const FIXED = ['runId', 'fromStatuses', 'toStatus', 'fencingToken', 'workerId', 'reason'] as const;

/**
 * Every status change is ONE conditional statement: lock the row only if it is in an allowed
 * status (and holds the fencing token), update it, and insert its run_events row — atomically,
 * never read-modify-write. Zero rows back means the condition did not hold.
 */
@Injectable()
export class RunTransitionsRepository {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly statements: PgStatements,
    private readonly metrics: MetricsService,
  ) {}

  /**
   * Runs the transition: inside the caller's transaction when `em` is given, otherwise as one
   * autocommitted, prepared statement straight on the pool (the hot path: dispatch, finalize).
   */
  async transition<R extends RunRow = RunRow>(
    runId: string,
    spec: TransitionSpec,
    em?: EntityManager,
  ): Promise<R | null> {
    const { text, values } = this.statement(runId, spec);
    const rows: R[] = em ? await em.query(text, values) : await this.statements.preparedRows<R>(text, values);
    return this.counted(spec, rows[0] ?? null);
  }

  /** Counts a transition the caller ran itself (see statement()). */
  counted<R>(spec: TransitionSpec, row: R | null): R | null {
    if (row) this.metrics.runTransitions.inc({ to: spec.to });
    return row;
  }

  /** The transition's statement, for callers that send it together with others (the claim). */
  statement(runId: string, spec: TransitionSpec): Statement {
    assertTransitions(spec.from, spec.to);
    const sets = ['status = :toStatus::text', 'updated_at = now()', ...(spec.set ?? [])];
    // :fencingToken is always referenced (typed) so that Postgres can infer it when none is given.
    const conds = [
      'r.id = :runId',
      'r.status = ANY(:fromStatuses::text[])',
      '(:fencingToken::bigint IS NULL OR r.fencing_token = :fencingToken::bigint)',
    ];
    if (spec.where) conds.push(`(${spec.where})`);
    const fixed: Record<(typeof FIXED)[number], unknown> = {
      runId,
      fromStatuses: spec.from,
      toStatus: spec.to,
      fencingToken: spec.fencingToken ?? null,
      workerId: spec.workerId ?? null,
      reason: spec.reason ?? null,
    };
    const text = `
      WITH prev AS (
        SELECT r.id, r.status FROM runs r WHERE ${conds.join(' AND ')} FOR UPDATE
      ), upd AS (
        UPDATE runs r SET ${sets.join(', ')}
        FROM prev WHERE r.id = prev.id AND r.status = ANY(:fromStatuses::text[])
        RETURNING r.*, prev.status AS from_status
      ), ev AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT id, from_status, status, attempts, fencing_token, :workerId::text, :reason::text FROM upd
      )${spec.with ? `, ${spec.with.text}` : ''}
      SELECT upd.*${spec.output?.columns ?? ''} FROM upd ${spec.output?.join ?? ''}`;
    return bindNamed(text, mergeValues(fixed, spec.values, spec.with?.values));
  }

  /** Records the creation of a run (null → PENDING or QUEUED) in run_events. */
  async recordCreated(
    em: EntityManager,
    run: { id: string; status: RunStatus },
    reason: string,
    workerId: string | null,
  ): Promise<void> {
    await em.query(
      `INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason) VALUES ($1, NULL, $2, 0, 0, $3, $4)`,
      [run.id, run.status, workerId, reason],
    );
  }
}
