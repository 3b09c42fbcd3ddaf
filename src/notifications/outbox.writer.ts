import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import type { MetricsService } from '../metrics/metrics.service';
import { NotificationChannel, NotificationEventType, NotificationStatus } from './notification-log.entity';

export interface OutboxMessage {
  runId: string;
  eventType: NotificationEventType;
  text: string;
  blocks?: unknown[];
}

/** The outbox row as a CTE of the caller's statement: see OutboxWriter.cte(). */
export interface OutboxCte {
  /** `outbox AS (INSERT … SELECT … FROM <source> … RETURNING id)`. */
  sql: string;
  params: unknown[];
}

const COLUMNS = '(run_id, event_type, channel, status, message, last_error)';
// ON CONFLICT DO NOTHING on uq_notification_logs_run_event: a duplicate finalize adds nothing.
const ON_CONFLICT = 'ON CONFLICT ON CONSTRAINT uq_notification_logs_run_event DO NOTHING RETURNING id';

/**
 * Writes the outbox row in the same transaction as the run's terminal transition, so the promise
 * to notify commits or rolls back with the outcome itself: either inside the caller's transaction
 * (add) or as a CTE of the transition statement itself (cte: one statement, one round trip).
 */
@Injectable()
export class OutboxWriter {
  constructor(
    private readonly channels: { slackConfigured: boolean },
    private readonly metrics?: MetricsService,
  ) {}

  async add(em: EntityManager, msg: OutboxMessage, channel: NotificationChannel = 'slack'): Promise<string | null> {
    const rows: Array<{ id: string }> = await em.query(
      `INSERT INTO notification_logs ${COLUMNS} VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::jsonb, $6::text) ${ON_CONFLICT}`,
      [msg.runId, ...this.values(msg, channel)],
    );
    const id = rows[0]?.id ?? null;
    this.written(id);
    return id;
  }

  /**
   * The row as a data-modifying CTE named `outbox`, for a statement in which `source` (a CTE or
   * table) yields the run's row as `id` when the transition happened, and nothing otherwise.
   * Parameters are numbered from `firstParam`.
   */
  cte(msg: Omit<OutboxMessage, 'runId'>, source: string, firstParam: number, channel: NotificationChannel = 'slack'): OutboxCte {
    const params = this.values(msg, channel);
    const p = (i: number) => `$${firstParam + i}`;
    const sql = `outbox AS (
        INSERT INTO notification_logs ${COLUMNS}
        SELECT ${source}.id, ${p(0)}::text, ${p(1)}::text, ${p(2)}::text, ${p(3)}::jsonb, ${p(4)}::text FROM ${source}
        ${ON_CONFLICT}
      )`;
    return { sql, params };
  }

  /**
   * Call with the id the cte()'s statement returned (null: the row existed already). Counted when
   * the statement returns: a rolled-back transaction may over-count by one, harmlessly.
   */
  written(id: string | null): void {
    if (id && !this.channels.slackConfigured) this.metrics?.notifications.inc({ outcome: 'skipped' });
  }

  private values(msg: Omit<OutboxMessage, 'runId'>, channel: NotificationChannel): unknown[] {
    // Without a Slack URL the row is still written (SKIPPED) so an operator sees why nothing went out.
    const status = this.channels.slackConfigured ? NotificationStatus.PENDING : NotificationStatus.SKIPPED;
    const lastError = status === NotificationStatus.SKIPPED ? 'SLACK_WEBHOOK_URL is not set' : null;
    return [msg.eventType, channel, status, JSON.stringify({ text: msg.text, blocks: msg.blocks }), lastError];
  }
}
