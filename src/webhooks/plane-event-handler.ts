import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { isDbUnavailableError } from '../database/pg-errors';
import { MetricsService } from '../metrics/metrics.service';
import { TaskIntakeService } from '../tasks/task-intake.service';
import { PlaneEvent, requirementOf } from './plane-payload';
import { DeliveryOutcome, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { DeliveryStatus } from './webhook-delivery.entity';

export const PLANE = 'plane';
const MAX_ERROR = 2000;
const TASK_CREATED = 'task_created';

/** `transient`: processing failed because Postgres was out of reach; the same delivery can simply be processed again later. */
export type HandledOutcome = DeliveryOutcome & { transient?: boolean };

/**
 * What a stored Plane delivery leads to: the same code for the first pass, a retry that takes over
 * a delivery whose processing died, and an operator's replay. Everything below is idempotent per
 * work item, so running it again never creates a second task, run or workspace.
 */
@Injectable()
export class PlaneEventHandler {
  private readonly logger = new Logger(PlaneEventHandler.name);

  constructor(
    private readonly tasks: TaskIntakeService,
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async handle(deliveryId: string, e: PlaneEvent): Promise<HandledOutcome> {
    let outcome: HandledOutcome;
    try {
      outcome = await this.decide(deliveryId, e);
    } catch (err) {
      // Stored input never earns a 5xx (Plane would drop it for good): record it for a replay.
      const error = (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR);
      this.logger.error({
        msg: 'plane delivery failed; replay it once the cause is fixed',
        deliveryId,
        workItemId: e.workItemId,
        error,
      });
      outcome = {
        status: DeliveryStatus.FAILED,
        reason: 'processing_failed',
        error,
        transient: isDbUnavailableError(err),
      };
      await this.deliveries.recordOutcome(deliveryId, outcome).catch((recordErr: unknown) => {
        this.logger.error({
          msg: 'could not record the failure; the delivery stays accepted',
          deliveryId,
          error: String(recordErr),
        });
      });
    }
    this.metrics.deliveries.inc({ provider: PLANE, status: outcome.status });
    this.logger.log({
      msg: 'plane delivery handled',
      deliveryId,
      event: e.event,
      action: e.action,
      workItemId: e.workItemId,
      ...outcome,
    });
    return outcome;
  }

  private async decide(deliveryId: string, e: PlaneEvent): Promise<DeliveryOutcome> {
    // Our own bot's edits come back as events; acting on them would start loops.
    if (e.actorId !== null && this.config.plane.botActorIds.includes(e.actorId)) {
      this.metrics.duplicate('self_actor');
      return this.settle(deliveryId, { status: DeliveryStatus.IGNORED, reason: 'self_actor' });
    }
    if (e.intent === 'none') return this.settle(deliveryId, { status: DeliveryStatus.IGNORED, reason: e.ignoreReason });
    if (e.intent === 'close') return this.close(deliveryId, e);
    return this.open(deliveryId, e);
  }

  private async open(deliveryId: string, e: PlaneEvent): Promise<DeliveryOutcome> {
    const processed = (taskId: string, runId: string): DeliveryOutcome => ({
      status: DeliveryStatus.PROCESSED,
      reason: TASK_CREATED,
      taskId,
      runId,
    });
    const result = await this.tasks.open(
      {
        provider: PLANE,
        externalId: e.workItemId,
        project: {
          externalId: e.projectId!,
          name: `Plane ${e.projectId}`,
          maxConcurrentRuns: this.config.plane.projectMaxConcurrentRuns,
        },
        title: e.title,
        url: e.url,
        metadata: e.metadata,
        requirement: requirementOf(e),
      },
      // Marked in the task's own statement: a crash cannot leave a task whose delivery looks unprocessed.
      (run) => this.deliveries.processedCte(deliveryId, TASK_CREATED, run),
      // Plane sends `created` once per item: its task almost never exists yet.
      e.action?.startsWith('create') ?? false,
    );
    if (result.kind === 'created') return processed(result.taskId, result.runId);
    this.metrics.duplicate('business_key');
    return this.settle(deliveryId, {
      status: DeliveryStatus.DUPLICATE,
      reason: 'task_exists',
      taskId: result.taskId,
      runId: result.runId,
    });
  }

  private async close(deliveryId: string, e: PlaneEvent): Promise<DeliveryOutcome> {
    const result = await this.tasks.close(PLANE, e.workItemId, `work item ${e.action ?? e.event} in Plane`);
    if (result.kind === 'not_found')
      return this.settle(deliveryId, { status: DeliveryStatus.IGNORED, reason: 'unknown_work_item' });
    return this.settle(deliveryId, {
      status: DeliveryStatus.PROCESSED,
      reason: result.runCancelled ? 'task_cancelled_run_cancelled' : 'task_cancelled',
      taskId: result.taskId,
      runId: result.runId,
    });
  }

  private async settle(deliveryId: string, outcome: DeliveryOutcome): Promise<DeliveryOutcome> {
    await this.deliveries.recordOutcome(deliveryId, outcome);
    return outcome;
  }
}
