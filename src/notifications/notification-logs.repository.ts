import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { NotificationChannel, NotificationEventType, NotificationStatus } from './notification-log.entity';

export interface NotificationLogRow {
  run_id: string;
  event_type: NotificationEventType;
  channel: NotificationChannel;
  status: NotificationStatus;
  attempts: number;
  sent_at: Date | null;
}

/** Reads of the outbox for the API (writes: OutboxWriter; delivery: NotificationClaimsRepository). */
@Injectable()
export class NotificationLogsRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  async listForRun(runId: string): Promise<NotificationLogRow[]> {
    return this.ds.query(
      `SELECT run_id, event_type, channel, status, attempts, sent_at FROM notification_logs WHERE run_id = $1 ORDER BY created_at, id`,
      [runId],
    );
  }
}
