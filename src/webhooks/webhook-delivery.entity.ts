import { Check, Column, Entity, Index, PrimaryGeneratedColumn, Unique, UpdateDateColumn } from 'typeorm';

/** A retry of a stored delivery (same provider + dedupe key) is recorded once; see WebhookDeliveriesRepository. */
export const UQ_WEBHOOK_DELIVERIES_DEDUPE = 'uq_webhook_deliveries_dedupe';
export const PK_WEBHOOK_DELIVERIES = 'pk_webhook_deliveries';
export const CK_WEBHOOK_DELIVERIES_STATUS = 'ck_webhook_deliveries_status';
export const IX_WEBHOOK_DELIVERIES_STATUS = 'ix_webhook_deliveries_status';
export const IX_WEBHOOK_DELIVERIES_WORK_ITEM = 'ix_webhook_deliveries_work_item';

/** Delivery statuses are wire values (API filter, CHECK constraint, metric labels). */
export enum DeliveryStatus {
  /** Stored; processing has not finished (or the process died while it ran). */
  ACCEPTED = 'accepted',
  /** Processed, but the work item already had its task: nothing was created. */
  DUPLICATE = 'duplicate',
  IGNORED = 'ignored',
  PROCESSED = 'processed',
  FAILED = 'failed',
}

export const DELIVERY_STATUSES = Object.values(DeliveryStatus);

@Entity({ name: 'webhook_deliveries' })
@Unique(UQ_WEBHOOK_DELIVERIES_DEDUPE, ['provider', 'dedupeKey'])
@Check(CK_WEBHOOK_DELIVERIES_STATUS, `"status" IN ('accepted','duplicate','ignored','processed','failed')`)
@Index(IX_WEBHOOK_DELIVERIES_STATUS, ['provider', 'status', 'receivedAt'])
@Index(IX_WEBHOOK_DELIVERIES_WORK_ITEM, ['provider', 'workItemId'])
export class WebhookDeliveryEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: PK_WEBHOOK_DELIVERIES })
  id: string;

  @Column({ type: 'text' })
  provider: string;

  /** SHA-256 of the raw body (v1: retries are byte-identical) or the v2 `event_id`. */
  @Column({ name: 'dedupe_key', type: 'text' })
  dedupeKey: string;

  /** The sender's per-attempt id (X-Plane-Delivery): new on every retry, so only informative. */
  @Column({ name: 'external_delivery_id', type: 'text', nullable: true })
  externalDeliveryId: string | null;

  @Column({ name: 'payload_version', type: 'text' })
  payloadVersion: string;

  @Column({ type: 'text' })
  event: string;

  @Column({ type: 'text', nullable: true })
  action: string | null;

  @Column({ name: 'work_item_id', type: 'text', nullable: true })
  workItemId: string | null;

  @Column({ name: 'actor_id', type: 'text', nullable: true })
  actorId: string | null;

  @Column({ type: 'text', default: DeliveryStatus.ACCEPTED })
  status: DeliveryStatus;

  /** Why it was ignored or what processing concluded (self_actor, task_exists, task_created, ...). */
  @Column({ type: 'text', nullable: true })
  reason: string | null;

  @Column({ type: 'text', nullable: true })
  error: string | null;

  /** No foreign keys on purpose: the delivery log stays readable if a task or run is purged. */
  @Column({ name: 'task_id', type: 'uuid', nullable: true })
  taskId: string | null;

  @Column({ name: 'run_id', type: 'uuid', nullable: true })
  runId: string | null;

  /** Parsed body, kept for replay (jsonb: key order is not kept, the signature is not re-checked). */
  @Column({ type: 'jsonb' })
  payload: Record<string, unknown>;

  /** Retries of this body that were answered "duplicate" and changed nothing else. */
  @Column({ name: 'duplicate_count', type: 'integer', default: 0 })
  duplicateCount: number;

  @Column({ name: 'last_duplicate_at', type: 'timestamptz', nullable: true })
  lastDuplicateAt: Date | null;

  /** Times processing ran (the first pass, recoveries and replays). */
  @Column({ name: 'process_attempts', type: 'integer', default: 0 })
  processAttempts: number;

  @Column({ name: 'received_at', type: 'timestamptz', default: () => 'now()' })
  receivedAt: Date;

  @Column({ name: 'processed_at', type: 'timestamptz', nullable: true })
  processedAt: Date | null;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
