import { Injectable } from '@nestjs/common';
import { bindNamed } from '../database/named-params';
import { PgStatements } from '../database/pg-statements';
import { MetricsService } from '../metrics/metrics.service';
import { assertTransitions } from './run-state-machine';
import { RunStatus } from './run-status';

/** A run the bulk dispatch moved to QUEUED, with the generation its job id is made from. */
export interface QueuedRun {
  id: string;
  dispatch_generation: number;
}

const FROM = RunStatus.PENDING;
const TO = RunStatus.QUEUED;

/**
 * The bulk dispatch: PENDING→QUEUED for many runs in ONE conditional statement, with a run_events
 * row per run written as RunTransitionsRepository writes it. Rows are locked in id order, so two
 * bulk dispatches over overlapping runs wait for each other instead of deadlocking. Each row is
 * looked up by its id (a LATERAL probe of the primary key per run): left to itself the planner
 * chose a scan of the status index, whose PENDING entries — every PENDING run, and every run that
 * left PENDING since the last vacuum — it walked for each batch.
 */
@Injectable()
export class DispatchRepository {
  constructor(
    private readonly statements: PgStatements,
    private readonly metrics: MetricsService,
  ) {}

  /** The runs of `runIds` that were PENDING and are QUEUED now; the others are left untouched. */
  async queuePending(runIds: readonly string[], workerId: string | null, reason: string): Promise<QueuedRun[]> {
    assertTransitions([FROM], TO);
    const { text, values } = bindNamed(
      `
      WITH prev AS (
        SELECT r.id, r.status
          FROM (SELECT u.id, :fromStatus::text AS from_status FROM unnest(:runIds::uuid[]) AS u(id)
                 ORDER BY u.id OFFSET 0) u
          CROSS JOIN LATERAL (
            SELECT r.id, r.status FROM runs r WHERE r.id = u.id AND r.status = u.from_status
               FOR UPDATE OF r LIMIT 1
          ) r
      ), upd AS (
        UPDATE runs r SET status = :toStatus::text, updated_at = now(), dispatch_generation = r.dispatch_generation + 1
        -- The status prev saw under its lock: compared column to column, so that the planner probes
        -- the primary key here too instead of the status index.
        FROM prev WHERE r.id = prev.id AND r.status = prev.status
        RETURNING r.id, r.status, r.attempts, r.fencing_token, r.dispatch_generation, prev.status AS from_status
      ), ev AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT id, from_status, status, attempts, fencing_token, :workerId::text, :reason::text FROM upd
      )
      SELECT id, dispatch_generation FROM upd`,
      { runIds, fromStatus: FROM, toStatus: TO, workerId, reason },
    );
    const rows = await this.statements.preparedRows<QueuedRun>(text, values);
    if (rows.length) this.metrics.runTransitions.inc({ to: TO }, rows.length);
    return rows;
  }
}
