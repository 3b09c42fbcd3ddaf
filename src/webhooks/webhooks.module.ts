import { DynamicModule, Module } from '@nestjs/common';
import { AppRole, roleServesApi } from '../config/roles';
import { DeliveryRecordBatch } from './delivery-record-batch';
import { PlaneEventHandler } from './plane-event-handler';
import { PlaneIntakeService } from './plane-intake.service';
import { SettledDeliveries } from './settled-deliveries';
import { PlaneSpool } from './plane-spool';
import { PlaneSpoolDrainer } from './plane-spool-drainer';
import { PlaneWebhookController } from './plane-webhook.controller';
import { WebhookDeliveriesController } from './webhook-deliveries.controller';
import { WebhookDeliveriesPruner } from './webhook-deliveries.pruner';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';

/**
 * Plane intake: verify, dedupe, then hand the work item to the tasks module. `tasks` must be the
 * DynamicModule object the app imports (Nest identifies dynamic modules by reference). Only roles
 * that serve HTTP APIs receive webhooks; they also drain the spool of deliveries that arrived while
 * Postgres was unreachable.
 */
@Module({})
export class WebhooksModule {
  static register(role: AppRole, tasks: DynamicModule): DynamicModule {
    return {
      module: WebhooksModule,
      imports: [tasks],
      providers: [
        WebhookDeliveriesRepository,
        DeliveryRecordBatch,
        WebhookDeliveriesPruner,
        PlaneEventHandler,
        PlaneSpool,
        SettledDeliveries,
        PlaneIntakeService,
        ...(roleServesApi(role) ? [PlaneSpoolDrainer] : []),
      ],
      controllers: roleServesApi(role) ? [PlaneWebhookController, WebhookDeliveriesController] : [],
    };
  }
}
