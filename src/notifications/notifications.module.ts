import { DynamicModule, Module, Provider } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { AppRole, roleRunsScheduler, roleRunsWorkers, roleServesApi } from '../config/roles';
import { APP_CONFIG } from '../config/config.module';
import { NotificationClaimsRepository } from './notification-claims.repository';
import { NotificationDeliveryService } from './notification-delivery.service';
import { NotificationSweeper } from './notification-sweeper';
import { NotificationsController } from './notifications.controller';
import { NotificationsProcessor } from './notifications.processor';
import { NotificationLogsRepository } from './notification-logs.repository';
import { NotificationsService } from './notifications.service';
import { OutboxModule } from './outbox.module';
import { SlackClient } from './slack.client';

const slackClient: Provider = {
  provide: SlackClient,
  inject: [APP_CONFIG],
  useFactory: (config: AppConfig) => new SlackClient(config.notify.slackWebhookUrl),
};

/**
 * Delivery and reading of the outbox, by role: the processor where workers run, the sweeper
 * where the scheduler runs, GET /api/notifications where the API is served. The writing side
 * (OutboxModule) is imported by runs.
 */
@Module({})
export class NotificationsModule {
  static register(role: AppRole): DynamicModule {
    const worker = roleRunsWorkers(role);
    const scheduler = roleRunsScheduler(role);
    const api = roleServesApi(role);
    const providers: Provider[] = [
      ...(worker || scheduler ? [NotificationClaimsRepository] : []),
      ...(worker ? [slackClient, NotificationDeliveryService, NotificationsProcessor] : []),
      ...(scheduler ? [NotificationSweeper] : []),
      ...(api ? [NotificationLogsRepository, NotificationsService] : []),
    ];
    return {
      module: NotificationsModule,
      imports: [OutboxModule],
      providers,
      controllers: api ? [NotificationsController] : [],
    };
  }
}
