import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { MetricsService } from '../metrics/metrics.service';
import { inOneRoundTrip, preparedRows, Statement } from './pg-round-trips';
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
  /** Extra assignments, SQL expressions over `r` using $-params after the fixed ones. */
  set?: string[];
  /** An extra condition on `r` (same params). */
  where?: string;
  params?: unknown[];
  workerId?: string | null;
  reason?: string | null;
}

const FIXED_PARAMS = 6; // $1 id, $2 from[], $3 to, $4 token, $5 worker, $6 reason

/**
 * The columns a transition returns, listed rather than `r.*`: a prepared statement whose result
 * type changes (a migration adds a column while the process runs) fails with "cached plan must not
 * change result type". Keep in step with RunRow.
 */
const RUN_COLUMNS = [
  'id',
  'project_id',
  'task_id',
  'kind',
  'requirement',
  'status',
  'attempts',
  'fencing_token',
  'lease_owner',
  'lease_expires_at',
  'dispatch_generation',
  'last_error',
  'output_tail',
  'started_at',
  'finished_at',
  'created_at',
  'updated_at',
]
  .map((c) => `r.${c}`)
  .join(', ');

/**
 * Every status change is ONE conditional statement: lock the row only if it is in an allowed
 * status (and holds the fencing token), update it, and insert its run_events row — atomically,
 * never read-modify-write. Zero rows back means the condition did not hold.
 */
@Injectable()
export class RunTransitionsRepository {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly metrics: MetricsService,
  ) {}

  static paramBase = FIXED_PARAMS;

  async transition(runId: string, spec: TransitionSpec, em?: EntityManager): Promise<RunRow | null> {
    const { text, values } = this.statement(runId, spec);
    return this.counted(spec, (await preparedRows<RunRow>(em ?? this.ds, text, values))[0]);
  }

  /**
   * `before` (e.g. a row lock), then the transition, in ONE round trip and one transaction: the
   * transition sees everything committed before `before`'s lock was granted (pg-round-trips.ts).
   */
  async transitionAfter<B>(before: Statement, runId: string, spec: TransitionSpec): Promise<{ before: B[]; row: RunRow | null }> {
    const [first, second] = await inOneRoundTrip(this.ds, [before, this.statement(runId, spec)]);
    return { before: first as B[], row: this.counted(spec, (second as RunRow[])[0]) };
  }

  private counted<R>(spec: TransitionSpec, row: R | undefined): R | null {
    if (row) this.metrics.runTransitions.inc({ to: spec.to });
    return row ?? null;
  }

  private statement(runId: string, spec: TransitionSpec): Statement {
    assertTransitions(spec.from, spec.to);
    const sets = ['status = $3::text', 'updated_at = now()', ...(spec.set ?? [])];
    // $4 is always referenced (typed) so that Postgres can infer it when no token is given.
    const conds = ['r.id = $1', 'r.status = ANY($2::text[])', '($4::bigint IS NULL OR r.fencing_token = $4::bigint)'];
    if (spec.where) conds.push(`(${spec.where})`);
    const text = `
      WITH prev AS (
        SELECT r.id, r.status FROM runs r WHERE ${conds.join(' AND ')} FOR UPDATE
      ), upd AS (
        UPDATE runs r SET ${sets.join(', ')}
        FROM prev WHERE r.id = prev.id AND r.status = ANY($2::text[])
        RETURNING ${RUN_COLUMNS}, prev.status AS from_status
      ), ev AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT id, from_status, status, attempts, fencing_token, $5::text, $6::text FROM upd
      )
      SELECT * FROM upd`;
    const values = [runId, spec.from, spec.to, spec.fencingToken ?? null, spec.workerId ?? null, spec.reason ?? null, ...(spec.params ?? [])];
    return { text, values };
  }

  /** Records the creation of a run (null → PENDING or QUEUED) in run_events. */
  async recordCreated(em: EntityManager, run: { id: string; status: RunStatus }, reason: string, workerId: string | null): Promise<void> {
    await em.query(
      `INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason) VALUES ($1, NULL, $2, 0, 0, $3, $4)`,
      [run.id, run.status, workerId, reason],
    );
  }
}
