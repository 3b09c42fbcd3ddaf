import { Injectable, OnModuleInit } from '@nestjs/common';
import { ScheduledTasks } from '../scheduler/scheduled-tasks.service';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';

export const DELIVERIES_PRUNE_TASK = 'webhook-deliveries.prune';
/** Delivered webhooks are kept this long for replay and audit. */
export const DELIVERY_RETENTION_DAYS = 30;

/** Old webhook deliveries are deleted on the scheduler's interval (one replica at a time). */
@Injectable()
export class WebhookDeliveriesPruner implements OnModuleInit {
  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly scheduled: ScheduledTasks,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(DELIVERIES_PRUNE_TASK, () => this.deliveries.pruneOlderThan(DELIVERY_RETENTION_DAYS));
  }
}
