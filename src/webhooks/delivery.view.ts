import { DeliveryRow } from './webhook-deliveries.repository';
import { DeliveryStatus } from './webhook-delivery.entity';

/** The API shape of a recorded delivery (the payload stays in the database, for replay). */
export interface DeliveryView {
  id: string;
  provider: string;
  externalDeliveryId: string | null;
  payloadVersion: string;
  event: string;
  action: string | null;
  workItemId: string | null;
  actorId: string | null;
  status: DeliveryStatus;
  reason: string | null;
  error: string | null;
  taskId: string | null;
  runId: string | null;
  duplicateCount: number;
  processAttempts: number;
  receivedAt: string;
  processedAt: string | null;
  lastDuplicateAt: string | null;
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
