import { Injectable } from '@nestjs/common';
import { NotificationLogsRepository } from './notification-logs.repository';
import { NotificationList } from './notification.view';

@Injectable()
export class NotificationsService {
  constructor(private readonly logs: NotificationLogsRepository) {}

  async listForRun(runId: string): Promise<NotificationList> {
    const rows = await this.logs.listForRun(runId);
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
