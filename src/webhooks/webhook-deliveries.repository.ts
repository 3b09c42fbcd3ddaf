import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { NamedStatement } from '../database/named-params';
import { PgStatements } from '../database/pg-statements';
import { queryRows } from '../database/query-rows';
import { DeliveryStatus, UQ_WEBHOOK_DELIVERIES_DEDUPE } from './webhook-delivery.entity';

export interface NewDelivery {
  provider: string;
  dedupeKey: string;
  externalDeliveryId: string | null;
  payloadVersion: string;
  event: string;
  action: string | null;
  workItemId: string | null;
  actorId: string | null;
  payload: Record<string, unknown>;
}

export type RecordResult =
  | { kind: 'new'; id: string }
  /** A retry: only its counter moved. `takeOver` when the first attempt's processing died. */
  | { kind: 'duplicate'; id: string; status: DeliveryStatus; takeOver: boolean };

export interface DeliveryOutcome {
  status: DeliveryStatus;
  reason: string | null;
  error?: string | null;
  taskId?: string | null;
  runId?: string | null;
}

/** A delivery row as stored (snake_case, straight from Postgres). */
export interface DeliveryRow {
  id: string;
  provider: string;
  dedupe_key: string;
  external_delivery_id: string | null;
  payload_version: string;
  event: string;
  action: string | null;
  work_item_id: string | null;
  actor_id: string | null;
  status: DeliveryStatus;
  reason: string | null;
  error: string | null;
  task_id: string | null;
  run_id: string | null;
  payload: Record<string, unknown>;
  duplicate_count: number;
  last_duplicate_at: Date | null;
  process_attempts: number;
  received_at: Date;
  processed_at: Date | null;
  updated_at: Date;
}

/**
 * A delivery still `accepted` this long after its last touch was being processed by a process
 * that died (processing takes milliseconds; Plane gives up on an answer after 30 s).
 */
export const STALE_ACCEPTED_MS = 60_000;

/**
 * Records deliveries of distinct dedupe keys: $1 a JSON array of the rows, $2 STALE_ACCEPTED_MS
 * (`stale`: accepted, untouched for that long; see takeOver). In dedupe-key order, so two batches
 * that share keys take their locks in the same order and never deadlock. A key twice in one
 * statement would be an error ("cannot affect row a second time"): the caller never sends one twice.
 */
const RECORD_DELIVERIES = `INSERT INTO webhook_deliveries (provider, dedupe_key, external_delivery_id, payload_version, event, action, work_item_id, actor_id, payload)
  SELECT d.provider, d.dedupe_key, d.external_delivery_id, d.payload_version, d.event, d.action, d.work_item_id, d.actor_id, d.payload
    FROM json_to_recordset($1::json) AS d(provider text, dedupe_key text, external_delivery_id text, payload_version text,
                                            event text, action text, work_item_id text, actor_id text, payload jsonb)
   ORDER BY d.dedupe_key
  ON CONFLICT ON CONSTRAINT ${UQ_WEBHOOK_DELIVERIES_DEDUPE} DO UPDATE
     SET duplicate_count = webhook_deliveries.duplicate_count + 1, last_duplicate_at = now()
  RETURNING id, dedupe_key, status, duplicate_count = 0 AS inserted,
            status = 'accepted' AND updated_at < now() - $2 * interval '1 millisecond' AS stale`;

/** $1 id, $2 status, $3 reason, $4 error, $5 task id, $6 run id. */
const FINISH_DELIVERY = `UPDATE webhook_deliveries SET
    status = CASE WHEN status = 'processed' AND $2::text = 'duplicate' THEN status ELSE $2::text END,
    reason = CASE WHEN status = 'processed' AND $2::text = 'duplicate' THEN reason ELSE $3::text END,
    error = $4,
    task_id = COALESCE($5, task_id),
    run_id = COALESCE($6, run_id),
    process_attempts = process_attempts + 1,
    processed_at = now(),
    updated_at = now()
  WHERE id = $1`;

@Injectable()
export class WebhookDeliveriesRepository {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly statements: PgStatements,
  ) {}

  /** One delivery: recordMany() of one (a spooled delivery, processed on its own). */
  async record(d: NewDelivery): Promise<RecordResult> {
    return (await this.recordMany([d]))[0];
  }

  /**
   * The one statement on the hot path, for the deliveries of distinct dedupe keys a process
   * receives in one turn (DeliveryRecordBatch): each inserted, or — on a conflict on the dedupe
   * key, a retry — its stored row's duplicate counter bumped, in ONE round trip. `ON CONFLICT DO
   * UPDATE` (not a DO NOTHING followed by a second statement) because under READ COMMITTED it locks
   * and updates the latest committed row even when that row was committed after this statement's
   * snapshot (a retry racing the first attempt): each row always ends in exactly one of insert or
   * bump, never in neither. `duplicate_count = 0` in the answer means this statement inserted the
   * row. Prepared (named): Postgres plans it once per connection.
   */
  async recordMany(ds: NewDelivery[]): Promise<RecordResult[]> {
    const rows = await this.statements.preparedRows<{
      id: string;
      dedupe_key: string;
      status: DeliveryStatus;
      inserted: boolean;
      stale: boolean;
    }>(RECORD_DELIVERIES, [JSON.stringify(ds.map(toRecordRow)), STALE_ACCEPTED_MS]);
    const byKey = new Map(rows.map((r) => [r.dedupe_key, r]));
    return Promise.all(
      ds.map(async (d): Promise<RecordResult> => {
        const row = byKey.get(d.dedupeKey);
        if (!row) throw new Error(`delivery ${d.provider}:${d.dedupeKey} neither inserted nor bumped`);
        if (row.inserted) return { kind: 'new', id: row.id };
        return {
          kind: 'duplicate',
          id: row.id,
          status: row.status,
          takeOver: row.stale && (await this.takeOver(row.id)),
        };
      }),
    );
  }

  /** Retries counted in memory (SettledDeliveries), added to their rows in ONE statement. */
  async addDuplicates(counts: Map<string, { n: number; last: Date }>): Promise<void> {
    const ids = [...counts.keys()];
    await queryRows(
      this.ds,
      `UPDATE webhook_deliveries d
          SET duplicate_count = d.duplicate_count + v.n, last_duplicate_at = GREATEST(d.last_duplicate_at, v.last)
         FROM unnest($1::uuid[], $2::int[], $3::timestamptz[]) AS v(id, n, last) WHERE d.id = v.id`,
      [ids, ids.map((id) => counts.get(id)!.n), ids.map((id) => counts.get(id)!.last)],
    );
  }

  /**
   * Claims a stale `accepted` delivery for this retry. Rare (its first processing died), so a
   * statement of its own: concurrent retries all saw it stale, but the row lock and the re-checked
   * condition let exactly one of them move `updated_at` and so take it over.
   */
  private async takeOver(id: string): Promise<boolean> {
    const rows = await queryRows<{ id: string }>(
      this.ds,
      `UPDATE webhook_deliveries SET updated_at = now()
        WHERE id = $1 AND status = 'accepted' AND updated_at < now() - $2 * interval '1 millisecond'
        RETURNING id`,
      [id, STALE_ACCEPTED_MS],
    );
    return rows.length > 0;
  }

  /**
   * Stores what processing concluded. A replay that finds the task already there does not turn a
   * `processed` delivery into a `duplicate`: the first pass did create it.
   */
  async recordOutcome(id: string, o: DeliveryOutcome, em?: EntityManager): Promise<void> {
    const params = [id, o.status, o.reason, o.error ?? null, o.taskId ?? null, o.runId ?? null];
    // Prepared only outside a transaction (preparedRows' 26000 fallback resends; a transaction could not).
    if (em) await em.query(FINISH_DELIVERY, params);
    else await this.statements.preparedRows(FINISH_DELIVERY, params);
  }

  /**
   * recordOutcome() of a delivery that created a task, as a data-modifying CTE of the statement
   * that creates it: `source` yields the new run as `id` and `task_id` (nothing: no change), so
   * the delivery is marked in the task's own commit. Values named `delivery*`.
   */
  processedCte(id: string, reason: string, source: string): NamedStatement {
    const text = `delivery_outcome AS (
        UPDATE webhook_deliveries d SET status = :deliveryStatus::text, reason = :deliveryReason::text, error = NULL,
               task_id = ${source}.task_id, run_id = ${source}.id, process_attempts = d.process_attempts + 1,
               processed_at = now(), updated_at = now()
          FROM ${source} WHERE d.id = :deliveryId::uuid
      )`;
    return { text, values: { deliveryId: id, deliveryStatus: DeliveryStatus.PROCESSED, deliveryReason: reason } };
  }

  async get(id: string): Promise<DeliveryRow | null> {
    const rows: DeliveryRow[] = await this.ds.query('SELECT * FROM webhook_deliveries WHERE id = $1', [id]);
    return rows[0] ?? null;
  }

  async list(q: { provider?: string; status?: DeliveryStatus; limit: number }): Promise<DeliveryRow[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (q.provider) where.push(`provider = $${params.push(q.provider)}`);
    if (q.status) where.push(`status = $${params.push(q.status)}`);
    return this.ds.query(
      `SELECT * FROM webhook_deliveries ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY received_at DESC, id DESC LIMIT $${params.push(q.limit)}`,
      params,
    );
  }

  /** Deletes deliveries received more than `days` ago; answers how many. */
  async pruneOlderThan(days: number): Promise<number> {
    const rows = await queryRows(
      this.ds,
      `DELETE FROM webhook_deliveries WHERE received_at < now() - $1 * interval '1 day' RETURNING id`,
      [days],
    );
    return rows.length;
  }
}

/** A delivery as a row of RECORD_DELIVERIES' JSON (its column names). */
function toRecordRow(d: NewDelivery): Record<string, unknown> {
  return {
    provider: d.provider,
    dedupe_key: d.dedupeKey,
    external_delivery_id: d.externalDeliveryId,
    payload_version: d.payloadVersion,
    event: d.event,
    action: d.action,
    work_item_id: d.workItemId,
    actor_id: d.actorId,
    payload: d.payload,
  };
}
