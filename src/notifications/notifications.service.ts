import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { NotificationChannel, NotificationEventType, NotificationStatus } from './notification-log.entity';
import { NotificationList } from './notification.view';

@Injectable()
export class NotificationsService {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  async listForRun(runId: string): Promise<NotificationList> {
    const rows: Array<{
      run_id: string;
      event_type: NotificationEventType;
      channel: NotificationChannel;
      status: NotificationStatus;
      attempts: number;
      sent_at: Date | null;
    }> = await this.ds.query(
      `SELECT run_id, event_type, channel, status, attempts, sent_at FROM notification_logs WHERE run_id = $1 ORDER BY created_at, id`,
      [runId],
    );
    return {
      items: rows.map((r) => ({
        runId: r.run_id,
        eventType: r.event_type,
        channel: r.channel,
        status: r.status,
        attempts: r.attempts,
        sentAt: r.sent_at === null ? null : new Date(r.sent_at).toISOString(),
      })),
    };
  }
}
