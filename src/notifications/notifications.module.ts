import { Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { NotificationKicker } from './notification-kicker';
import { OutboxWriter } from './outbox.writer';

@Module({
  providers: [
    NotificationKicker,
    {
      provide: OutboxWriter,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => new OutboxWriter({ slackConfigured: Boolean(config.slackWebhookUrl) }),
    },
  ],
  exports: [OutboxWriter, NotificationKicker],
})
export class NotificationsModule {}
