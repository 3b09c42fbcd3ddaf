import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
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

@Injectable()
export class WebhookDeliveriesRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  /**
   * The one insert on the hot path. A conflict on the dedupe key means a retry: the stored row
   * only gets its duplicate counter bumped. The bump is a separate statement on purpose: it starts
   * a new snapshot, so it sees the row whose commit the insert waited for.
   */
  async record(d: NewDelivery): Promise<RecordResult> {
    const rows: Array<{ id: string }> = await this.ds.query(
      `INSERT INTO webhook_deliveries (provider, dedupe_key, external_delivery_id, payload_version, event, action, work_item_id, actor_id, payload)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT ON CONSTRAINT ${UQ_WEBHOOK_DELIVERIES_DEDUPE} DO NOTHING
       RETURNING id`,
      [d.provider, d.dedupeKey, d.externalDeliveryId, d.payloadVersion, d.event, d.action, d.workItemId, d.actorId, d.payload],
    );
    if (rows[0]) return { kind: 'new', id: rows[0].id };
    // The row lock makes at most one concurrent retry see (and so take over) a stale delivery.
    // TypeORM answers an UPDATE with [rows, affected count].
    const [bumped]: [Array<{ id: string; status: DeliveryStatus; take_over: boolean }>, number] = await this.ds.query(
      `WITH old AS (
         SELECT id, status, status = 'accepted' AND updated_at < now() - $3 * interval '1 millisecond' AS stale
           FROM webhook_deliveries WHERE provider = $1 AND dedupe_key = $2 FOR UPDATE
       )
       UPDATE webhook_deliveries d
          SET duplicate_count = d.duplicate_count + 1, last_duplicate_at = now(),
              updated_at = CASE WHEN old.stale THEN now() ELSE d.updated_at END
         FROM old WHERE d.id = old.id
       RETURNING d.id, d.status, old.stale AS take_over`,
      [d.provider, d.dedupeKey, STALE_ACCEPTED_MS],
    );
    const row = bumped[0];
    if (!row) throw new Error(`delivery ${d.provider}:${d.dedupeKey} neither inserted nor found`);
    return { kind: 'duplicate', id: row.id, status: row.status, takeOver: row.take_over };
  }

  /**
   * Stores what processing concluded. A replay that finds the task already there does not turn a
   * `processed` delivery into a `duplicate`: the first pass did create it.
   */
  async finish(id: string, o: DeliveryOutcome, em: EntityManager = this.ds.manager): Promise<void> {
    await em.query(
      `UPDATE webhook_deliveries SET
          status = CASE WHEN status = 'processed' AND $2::text = 'duplicate' THEN status ELSE $2::text END,
          reason = CASE WHEN status = 'processed' AND $2::text = 'duplicate' THEN reason ELSE $3::text END,
          error = $4,
          task_id = COALESCE($5, task_id),
          run_id = COALESCE($6, run_id),
          process_attempts = process_attempts + 1,
          processed_at = now(),
          updated_at = now()
        WHERE id = $1`,
      [id, o.status, o.reason, o.error ?? null, o.taskId ?? null, o.runId ?? null],
    );
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
}
