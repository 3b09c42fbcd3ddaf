import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import type { NamedStatement } from '../database/named-params';
import { Queryable, queryRows } from '../database/query-rows';
import type { MetricsService } from '../metrics/metrics.service';
import {
  NotificationChannel,
  NotificationEventType,
  NotificationStatus,
  UQ_NOTIFICATION_LOGS_RUN_EVENT,
} from './notification-log.entity';

export interface OutboxMessage {
  runId: string;
  eventType: NotificationEventType;
  text: string;
  blocks?: unknown[];
}

const COLUMNS = '(run_id, event_type, channel, status, message, last_error)';
// A duplicate finalize adds nothing.
const ON_CONFLICT = `ON CONFLICT ON CONSTRAINT ${UQ_NOTIFICATION_LOGS_RUN_EVENT} DO NOTHING`;

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
      `INSERT INTO notification_logs ${COLUMNS} VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::jsonb, $6::text) ${ON_CONFLICT} RETURNING id`,
      [msg.runId, ...Object.values(this.values(msg, channel))],
    );
    const id = rows[0]?.id ?? null;
    this.written(id);
    return id;
  }

  /**
   * The row as a data-modifying CTE named `outbox`, for a statement in which `source` (a CTE or
   * table) yields the run's row as `id` when the transition happened, and nothing otherwise.
   * Its values are named `outbox*`, so they cannot collide with the statement's own.
   */
  cte(msg: Omit<OutboxMessage, 'runId'>, source: string, channel: NotificationChannel = 'slack'): NamedStatement {
    const text = `outbox AS (
        INSERT INTO notification_logs ${COLUMNS}
        SELECT ${source}.id, :outboxEventType::text, :outboxChannel::text, :outboxStatus::text, :outboxMessage::jsonb, :outboxLastError::text
          FROM ${source}
        ${ON_CONFLICT} RETURNING id
      )`;
    return { text, values: this.values(msg, channel) };
  }

  /**
   * cte() for a statement that finalizes many runs: `source` yields, per run whose transition
   * happened, its `id`, `event_type` (null: no notification) and `message` (jsonb, see message()).
   * The CTE returns `id` and `run_id` of each row it wrote.
   */
  batchCte(source: string, channel: NotificationChannel = 'slack'): NamedStatement {
    const text = `outbox AS (
        INSERT INTO notification_logs ${COLUMNS}
        SELECT ${source}.id, ${source}.event_type, :outboxChannel::text, :outboxStatus::text, ${source}.message, :outboxLastError::text
          FROM ${source} WHERE ${source}.event_type IS NOT NULL
        ${ON_CONFLICT} RETURNING id, run_id
      )`;
    return { text, values: this.delivery(channel) };
  }

  /** The stored message of an outbox row (its `message` column). */
  message(msg: Pick<OutboxMessage, 'text' | 'blocks'>): string {
    return JSON.stringify({ text: msg.text, blocks: msg.blocks });
  }

  /** The id of the run's newest outbox row, to settle a finalize whose commit answer was lost. */
  async latestIdForRun(db: Queryable, runId: string): Promise<string | null> {
    const rows = await queryRows<{ id: string }>(
      db,
      'SELECT id FROM notification_logs WHERE run_id = $1 ORDER BY created_at DESC LIMIT 1',
      [runId],
    );
    return rows[0]?.id ?? null;
  }

  /**
   * Call with the id the cte()'s statement returned (null: the row existed already). Counted when
   * the statement returns: a rolled-back transaction may over-count by one, harmlessly.
   */
  written(id: string | null): void {
    if (id && !this.channels.slackConfigured) this.metrics?.notifications.inc({ outcome: 'skipped' });
  }

  private values(msg: Omit<OutboxMessage, 'runId'>, channel: NotificationChannel) {
    const { outboxChannel, outboxStatus, outboxLastError } = this.delivery(channel);
    // In add()'s column order.
    return {
      outboxEventType: msg.eventType,
      outboxChannel,
      outboxStatus,
      outboxMessage: this.message(msg),
      outboxLastError,
    };
  }

  /** The values every row of a channel shares. */
  private delivery(channel: NotificationChannel) {
    // Without a Slack URL the row is still written (SKIPPED) so an operator sees why nothing went out.
    const status = this.channels.slackConfigured ? NotificationStatus.PENDING : NotificationStatus.SKIPPED;
    const lastError = status === NotificationStatus.SKIPPED ? 'SLACK_WEBHOOK_URL is not set' : null;
    return { outboxChannel: channel, outboxStatus: status, outboxLastError: lastError };
  }
}
