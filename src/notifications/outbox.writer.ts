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

/**
 * Writes the outbox row inside the CALLER's transaction (the run's terminal transition), so the
 * promise to notify commits or rolls back with the outcome itself. ON CONFLICT DO NOTHING on
 * uq_notification_logs_run_event: a duplicate finalize adds nothing.
 */
@Injectable()
export class OutboxWriter {
  constructor(
    private readonly channels: { slackConfigured: boolean },
    private readonly metrics?: MetricsService,
  ) {}

  async add(em: EntityManager, msg: OutboxMessage, channel: NotificationChannel = 'slack'): Promise<string | null> {
    // Without a Slack URL the row is still written (SKIPPED) so an operator sees why nothing went out.
    const status = this.channels.slackConfigured ? NotificationStatus.PENDING : NotificationStatus.SKIPPED;
    const rows: Array<{ id: string }> = await em.query(
      `INSERT INTO notification_logs (run_id, event_type, channel, status, message, last_error)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6)
       ON CONFLICT ON CONSTRAINT uq_notification_logs_run_event DO NOTHING
       RETURNING id`,
      [
        msg.runId,
        msg.eventType,
        channel,
        status,
        JSON.stringify({ text: msg.text, blocks: msg.blocks }),
        status === NotificationStatus.SKIPPED ? 'SLACK_WEBHOOK_URL is not set' : null,
      ],
    );
    const id = rows[0]?.id ?? null;
    // Counted before the caller commits: a rolled-back finalize may over-count by one, harmlessly.
    if (id && status === NotificationStatus.SKIPPED) this.metrics?.notifications.inc({ outcome: 'skipped' });
    return id;
  }
}
