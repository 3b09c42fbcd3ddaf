import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { bindNamed, mergeValues, NamedStatement, prefixed } from '../../database/named-params';
import { PgStatements } from '../../database/pg-statements';
import { queryRows } from '../../database/query-rows';
import type { NotificationEventType } from '../../notifications/notification-log.entity';
import { OutboxWriter } from '../../notifications/outbox.writer';
import { assertTransitions } from '../run-state-machine';
import { RunStatus } from '../run-status';
import { RunRow, RunTransitionsRepository, TransitionSpec } from '../run-transitions.repository';

/** What a finalize tells its caller of the row it wrote. */
export type FinalizedRun = Pick<RunRow, 'id' | 'status' | 'attempts' | 'fencing_token' | 'from_status'>;
export type FinalizedRow = FinalizedRun & { notification_id?: string | null };

/** A reaped run as its transition returns it (the whole row), with its outbox row's id. */
export type ReapedRow = RunRow & { notification_id?: string | null };

const FINALIZED_COLUMNS = 'id, status, attempts, fencing_token';

export interface FinalizeWrite {
  runId: string;
  to: RunStatus.SUCCESS | RunStatus.FAILED | RunStatus.RETRYING;
  fencingToken: string;
  outputTail: string;
  lastError: string | null;
  reason: string;
  workerId: string;
  /** The outbox row of a terminal outcome: its event type and stored message (OutboxWriter.message). */
  outbox: { eventType: NotificationEventType; message: string } | null;
}

export interface LostRun {
  id: string;
  fencing_token: string;
  attempts: number;
  requirement: string;
  project_name: string;
}

/** The statements of the worker path after the claim (RunClaimRepository): lease, finalize, hand-over, reaping, re-enqueueing. */
@Injectable()
export class RunWorkerRepository {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly statements: PgStatements,
    private readonly transitions: RunTransitionsRepository,
    private readonly outbox: OutboxWriter,
  ) {}

  /** The run's status and how long its lease still runs (null: none), to explain a failed claim. */
  async leaseState(runId: string): Promise<{ status: RunStatus; leaseMs: number | null } | null> {
    const rows = await queryRows<{ status: RunStatus; lease_ms: string | number | null }>(
      this.ds,
      `SELECT r.status, EXTRACT(EPOCH FROM (r.lease_expires_at - now())) * 1000 AS lease_ms FROM runs r WHERE r.id = $1`,
      [runId],
    );
    const r = rows[0];
    return r ? { status: r.status, leaseMs: r.lease_ms === null ? null : Number(r.lease_ms) } : null;
  }

  /** Extends the lease of a run still RUNNING under this token; false: cancelled or fenced out. */
  async extendLease(runId: string, fencingToken: string, leaseMs: number): Promise<boolean> {
    const rows = await queryRows(
      this.ds,
      `UPDATE runs SET lease_expires_at = now() + $3 * interval '1 millisecond'
        WHERE id = $1 AND fencing_token = $2 AND status = 'RUNNING' RETURNING id`,
      [runId, fencingToken, leaseMs],
    );
    return rows.length > 0;
  }

  /**
   * RUNNING → each attempt's outcome, for many runs in ONE statement (autocommit, prepared): per
   * run the same fenced, conditional transition as transition() makes, its run_events row and, when
   * terminal, its outbox row. Rows are locked in id order, so two batches cannot deadlock. Answers
   * the rows written; a run missing from them was fenced out. Each run at most once per batch.
   * Each row is looked up by its id (a LATERAL probe of the primary key): the planner's own
   * choice was a scan of the status index, whose RUNNING entries include one for every run that
   * finished since the last vacuum — a cost that grew with every batch.
   */
  async finalizeMany(writes: FinalizeWrite[]): Promise<FinalizedRow[]> {
    for (const w of writes) assertTransitions([RunStatus.RUNNING], w.to);
    const outbox = this.outbox.batchCte('done');
    const text = `
      WITH input AS (
        SELECT * FROM unnest(:runIds::uuid[], :fencingTokens::bigint[], :toStatuses::text[], :outputTails::text[],
                             :lastErrors::text[], :reasons::text[], :workerIds::text[], :eventTypes::text[], :messages::jsonb[])
          AS i(run_id, fencing_token, to_status, output_tail, last_error, reason, worker_id, event_type, message)
      ), prev AS (
        SELECT r.id, r.status, i.to_status, i.output_tail, i.last_error
          FROM (SELECT *, 'RUNNING'::text AS from_status FROM input ORDER BY run_id OFFSET 0) i
          CROSS JOIN LATERAL (
            SELECT r.id, r.status FROM runs r
             WHERE r.id = i.run_id AND r.status = i.from_status AND r.fencing_token = i.fencing_token
               FOR UPDATE OF r LIMIT 1
          ) r
      ), upd AS (
        UPDATE runs r SET status = prev.to_status, updated_at = now(), output_tail = prev.output_tail,
               last_error = prev.last_error, lease_owner = NULL, lease_expires_at = NULL,
               finished_at = CASE WHEN prev.to_status = 'RETRYING' THEN NULL ELSE now() END
          -- prev's status ('RUNNING', read under its lock), column to column: the primary key again.
          FROM prev WHERE r.id = prev.id AND r.status = prev.status
        RETURNING ${prefixed('r', FINALIZED_COLUMNS)}, prev.status AS from_status
      ), ev AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT upd.id, upd.from_status, upd.status, upd.attempts, upd.fencing_token, i.worker_id, i.reason
          FROM upd JOIN input i ON i.run_id = upd.id
      ), done AS (
        SELECT upd.id, i.event_type, i.message FROM upd JOIN input i ON i.run_id = upd.id
      ), ${outbox.text}
      SELECT upd.*, (SELECT o.id FROM outbox o WHERE o.run_id = upd.id) AS notification_id FROM upd`;
    const arrays = {
      runIds: writes.map((w) => w.runId),
      fencingTokens: writes.map((w) => w.fencingToken),
      toStatuses: writes.map((w) => w.to),
      outputTails: writes.map((w) => w.outputTail),
      lastErrors: writes.map((w) => w.lastError),
      reasons: writes.map((w) => w.reason),
      workerIds: writes.map((w) => w.workerId),
      eventTypes: writes.map((w) => w.outbox?.eventType ?? null),
      messages: writes.map((w) => w.outbox?.message ?? null),
    };
    const bound = bindNamed(text, mergeValues(arrays, outbox.values));
    const rows = await this.statements.preparedRows<FinalizedRow>(bound.text, bound.values);
    for (const row of rows) this.transitions.counted({ to: row.status, from: [RunStatus.RUNNING] }, row);
    return rows;
  }

  /** RUNNING → RETRYING without counting the interrupted attempt (a graceful shutdown). */
  async handOver(runId: string, fencingToken: string, workerId: string): Promise<RunRow | null> {
    return this.transitions.transition(runId, {
      to: RunStatus.RETRYING,
      from: [RunStatus.RUNNING],
      fencingToken,
      set: ['attempts = GREATEST(r.attempts - 1, 0)', 'lease_owner = NULL', 'lease_expires_at = NULL'],
      reason: 'worker shutting down: handed over',
      workerId,
    });
  }

  /** The row as it is now, after a commit whose answer was lost. */
  async readBack(runId: string): Promise<RunRow | null> {
    const rows = await queryRows<RunRow>(this.ds, 'SELECT *, status AS from_status FROM runs WHERE id = $1', [runId]);
    return rows[0] ?? null;
  }

  /** RUNNING runs whose lease expired, oldest first. */
  async findExpiredLeases(limit: number): Promise<LostRun[]> {
    return queryRows<LostRun>(
      this.ds,
      `SELECT r.id, r.fencing_token, r.attempts, r.requirement, p.name AS project_name
         FROM runs r JOIN projects p ON p.id = r.project_id
        WHERE r.status = 'RUNNING' AND r.lease_expires_at < now() ORDER BY r.lease_expires_at LIMIT $1`,
      [limit],
    );
  }

  /** A lost worker's run: back to RETRYING (a new dispatch generation) or, attempts spent, FAILED. */
  async reapLost(
    run: LostRun,
    w: { spent: boolean; outbox: NamedStatement | null; workerId: string },
  ): Promise<ReapedRow | null> {
    return this.transitions.transition<ReapedRow>(run.id, {
      to: w.spent ? RunStatus.FAILED : RunStatus.RETRYING,
      from: [RunStatus.RUNNING],
      fencingToken: run.fencing_token,
      where: 'r.lease_expires_at < now()',
      set: [
        'lease_owner = NULL',
        'lease_expires_at = NULL',
        "last_error = 'worker lost (lease expired)'",
        w.spent ? 'finished_at = now()' : 'dispatch_generation = r.dispatch_generation + 1',
      ],
      ...(w.outbox ? withOutboxRow(w.outbox) : {}),
      reason: w.spent ? 'reaper: worker lost and attempts spent' : 'reaper: worker lost, re-enqueued',
      workerId: w.workerId,
    });
  }

  /** QUEUED/RETRYING runs untouched for `graceMs`, oldest first: candidates for a lost job. */
  async findWaiting(graceMs: number, limit: number): Promise<Array<{ id: string; dispatch_generation: number }>> {
    return queryRows(
      this.ds,
      `SELECT id, dispatch_generation FROM runs
        WHERE status IN ('QUEUED', 'RETRYING') AND updated_at < now() - $1 * interval '1 millisecond'
        ORDER BY updated_at LIMIT $2`,
      [graceMs, limit],
    );
  }

  /** A new dispatch generation, only if nobody bumped it since: the new job id is then ours alone. */
  async bumpGeneration(runId: string, generation: number): Promise<{ id: string; dispatch_generation: number } | null> {
    const rows = await queryRows<{ id: string; dispatch_generation: number }>(
      this.ds,
      `UPDATE runs SET dispatch_generation = dispatch_generation + 1, updated_at = now()
        WHERE id = $1 AND status IN ('QUEUED', 'RETRYING') AND dispatch_generation = $2
        RETURNING id, dispatch_generation`,
      [runId, generation],
    );
    return rows[0] ?? null;
  }
}

/** Makes a transition's statement also write the outbox row and return its id (null: it existed). */
function withOutboxRow(outbox: NamedStatement): Pick<TransitionSpec, 'with' | 'output'> {
  return { with: outbox, output: { columns: ', (SELECT id FROM outbox) AS notification_id' } };
}
