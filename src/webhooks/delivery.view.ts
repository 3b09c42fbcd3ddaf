import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { DeliveryRow } from './webhook-deliveries.repository';
import { DeliveryStatus } from './webhook-delivery.entity';

/** The API shape of a recorded delivery (the payload stays in the database, for replay). */
export class DeliveryView {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'plane' })
  provider: string;

  @ApiProperty({ type: String, nullable: true, description: "The sender's per-attempt id (X-Plane-Delivery)" })
  externalDeliveryId: string | null;

  @ApiProperty({ example: 'v1' })
  payloadVersion: string;

  @ApiProperty({ example: 'issue' })
  event: string;

  @ApiProperty({ type: String, nullable: true, example: 'created' })
  action: string | null;

  @ApiProperty({ type: String, nullable: true })
  workItemId: string | null;

  @ApiProperty({ type: String, nullable: true })
  actorId: string | null;

  @ApiProperty({ enum: DeliveryStatus })
  status: DeliveryStatus;

  @ApiProperty({ type: String, nullable: true })
  reason: string | null;

  @ApiProperty({ type: String, nullable: true })
  error: string | null;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  taskId: string | null;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  runId: string | null;

  @ApiProperty({ type: 'integer', description: 'Retries of this delivery received after the first' })
  duplicateCount: number;

  @ApiProperty({ type: 'integer' })
  processAttempts: number;

  @ApiProperty({ format: 'date-time' })
  receivedAt: string;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  processedAt: string | null;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  lastDuplicateAt: string | null;
}

/** Recorded deliveries, newest first. */
export class DeliveryList {
  @ApiProperty({ type: [DeliveryView] })
  items: DeliveryView[];
}

/** What a replay of a stored delivery concluded (POST /api/webhook-deliveries/:id/replay). */
export class ReplayView {
  @ApiProperty({ format: 'uuid' })
  deliveryId: string;

  @ApiProperty({ enum: DeliveryStatus })
  status: DeliveryStatus;

  @ApiProperty({ type: String, nullable: true })
  reason: string | null;

  @ApiPropertyOptional({ type: String, nullable: true })
  error?: string | null;

  @ApiPropertyOptional({ type: String, format: 'uuid', nullable: true })
  taskId?: string | null;

  @ApiPropertyOptional({ type: String, format: 'uuid', nullable: true })
  runId?: string | null;
}

const iso = (d: Date | null) => (d === null ? null : new Date(d).toISOString());

export function toDeliveryView(r: DeliveryRow): DeliveryView {
  return {
    id: r.id,
    provider: r.provider,
    externalDeliveryId: r.external_delivery_id,
    payloadVersion: r.payload_version,
    event: r.event,
    action: r.action,
    workItemId: r.work_item_id,
    actorId: r.actor_id,
    status: r.status,
    reason: r.reason,
    error: r.error,
    taskId: r.task_id,
    runId: r.run_id,
    duplicateCount: r.duplicate_count,
    processAttempts: r.process_attempts,
    receivedAt: iso(r.received_at)!,
    processedAt: iso(r.processed_at),
    lastDuplicateAt: iso(r.last_duplicate_at),
  };
}
