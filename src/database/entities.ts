import { NotificationLogEntity } from '../notifications/notification-log.entity';
import { IdempotencyKeyEntity } from '../runs/idempotency/idempotency-key.entity';
import { ProjectEntity } from '../runs/entities/project.entity';
import { RunEventEntity } from '../runs/entities/run-event.entity';
import { RunEntity } from '../runs/entities/run.entity';
import { LlmCacheEntryEntity } from '../runs/llm-cache/llm-cache-entry.entity';
import { RunStepEntity } from '../runs/steps/run-step.entity';
import { RunValueEntity } from '../runs/steps/run-value.entity';
import { TaskEntity } from '../tasks/task.entity';
import { WebhookDeliveryEntity } from '../webhooks/webhook-delivery.entity';

/** Every entity, listed once: the data source, the drift check and the CLI all use this. */
export const ENTITIES = [
  ProjectEntity,
  TaskEntity,
  RunEntity,
  RunEventEntity,
  IdempotencyKeyEntity,
  NotificationLogEntity,
  WebhookDeliveryEntity,
  RunStepEntity,
  RunValueEntity,
  LlmCacheEntryEntity,
];
