import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';
import { NotificationKicker } from './notification-kicker';
import { OutboxWriter } from './outbox.writer';

/** The writing side of the outbox, for the module that owns the transaction (runs' finalize). */
@Module({
  providers: [
    NotificationKicker,
    {
      provide: OutboxWriter,
      inject: [APP_CONFIG, MetricsService],
      useFactory: (config: AppConfig, metrics: MetricsService) =>
        new OutboxWriter({ slackConfigured: Boolean(config.notify.slackWebhookUrl) }, metrics),
    },
  ],
  exports: [OutboxWriter, NotificationKicker],
})
export class OutboxModule {}
