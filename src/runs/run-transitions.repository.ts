import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
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
  /** Extra assignments, SQL expressions over `r` using $-params after the fixed ones. */
  set?: string[];
  /** An extra condition on `r` (same params). */
  where?: string;
  params?: unknown[];
  workerId?: string | null;
  reason?: string | null;
}

// Fixed parameters: $1 id, $2 from[], $3 to, $4 token, $5 worker, $6 reason

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

  async transition(runId: string, spec: TransitionSpec, em?: EntityManager): Promise<RunRow | null> {
    assertTransitions(spec.from, spec.to);
    const sets = ['status = $3::text', 'updated_at = now()', ...(spec.set ?? [])];
    // $4 is always referenced (typed) so that Postgres can infer it when no token is given.
    const conds = ['r.id = $1', 'r.status = ANY($2::text[])', '($4::bigint IS NULL OR r.fencing_token = $4::bigint)'];
    if (spec.where) conds.push(`(${spec.where})`);
    const sql = `
      WITH prev AS (
        SELECT r.id, r.status FROM runs r WHERE ${conds.join(' AND ')} FOR UPDATE
      ), upd AS (
        UPDATE runs r SET ${sets.join(', ')}
        FROM prev WHERE r.id = prev.id AND r.status = ANY($2::text[])
        RETURNING r.*, prev.status AS from_status
      ), ev AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT id, from_status, status, attempts, fencing_token, $5::text, $6::text FROM upd
      )
      SELECT * FROM upd`;
    const params = [runId, spec.from, spec.to, spec.fencingToken ?? null, spec.workerId ?? null, spec.reason ?? null, ...(spec.params ?? [])];
    const rows: RunRow[] = await (em ?? this.ds.manager).query(sql, params);
    const row = rows[0] ?? null;
    if (row) this.metrics.runTransitions.inc({ to: spec.to });
    return row;
  }

  /** Records the creation of a run (null → PENDING or QUEUED) in run_events. */
  async recordCreated(em: EntityManager, run: { id: string; status: RunStatus }, reason: string, workerId: string | null): Promise<void> {
    await em.query(
      `INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason) VALUES ($1, NULL, $2, 0, 0, $3, $4)`,
      [run.id, run.status, workerId, reason],
    );
  }
}
