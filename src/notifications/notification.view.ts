import { ApiProperty } from '@nestjs/swagger';
import type { NotificationChannel, NotificationEventType } from './notification-log.entity';
import { NotificationStatus } from './notification-log.entity';

const EVENT_TYPES: NotificationEventType[] = ['run.succeeded', 'run.failed'];
const CHANNELS: NotificationChannel[] = ['slack'];

/** The API shape of an outbox row (contract: GET /api/notifications?runId=). */
export class NotificationView {
  @ApiProperty({ format: 'uuid' })
  runId: string;

  @ApiProperty({ enum: EVENT_TYPES })
  eventType: NotificationEventType;

  @ApiProperty({ enum: CHANNELS })
  channel: NotificationChannel;

  @ApiProperty({ enum: NotificationStatus })
  status: NotificationStatus;

  @ApiProperty({ type: 'integer' })
  attempts: number;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  sentAt: string | null;
}

/** The notifications of one run, oldest first. */
export class NotificationList {
  @ApiProperty({ type: [NotificationView] })
  items: NotificationView[];
}
