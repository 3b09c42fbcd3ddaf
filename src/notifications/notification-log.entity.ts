import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  Index,
  PrimaryGeneratedColumn,
  Unique,
  UpdateDateColumn,
} from 'typeorm';

/** One message per (run, event, channel): the outbox row is the promise to deliver it. */
export const UQ_NOTIFICATION_LOGS_RUN_EVENT = 'uq_notification_logs_run_event';

export enum NotificationStatus {
  PENDING = 'PENDING',
  SENT = 'SENT',
  FAILED = 'FAILED',
  SKIPPED = 'SKIPPED',
}

export type NotificationEventType = 'run.succeeded' | 'run.failed';
export type NotificationChannel = 'slack';

@Entity({ name: 'notification_logs' })
@Unique(UQ_NOTIFICATION_LOGS_RUN_EVENT, ['runId', 'eventType', 'channel'])
@Check('ck_notification_logs_status', `"status" IN ('PENDING','SENT','FAILED','SKIPPED')`)
@Index('ix_notification_logs_due', ['status', 'nextAttemptAt'])
export class NotificationLogEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_notification_logs' })
  id: string;

  /** No foreign key on purpose: notifications stay readable even if a run is purged. */
  @Column({ name: 'run_id', type: 'uuid' })
  runId: string;

  @Column({ name: 'event_type', type: 'text' })
  eventType: NotificationEventType;

  @Column({ type: 'text' })
  channel: NotificationChannel;

  @Column({ type: 'text', default: NotificationStatus.PENDING })
  status: NotificationStatus;

  /** Rendered when the row is written, so delivery needs nothing from the runs module. */
  @Column({ type: 'jsonb' })
  message: { text: string; blocks?: unknown[] };

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'next_attempt_at', type: 'timestamptz', default: () => 'now()' })
  nextAttemptAt: Date;

  /** Set while a deliverer holds the row; an expired claim may be taken over. */
  @Column({ name: 'claimed_until', type: 'timestamptz', nullable: true })
  claimedUntil: Date | null;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true })
  sentAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
