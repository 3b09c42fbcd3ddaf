import { BullModule } from '@nestjs/bull';
import { Global, Module } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { ALL_QUEUES } from './queue-names';
import { queueOptions } from './queue-settings';

@Global()
@Module({
  imports: [
    BullModule.forRootAsync({ inject: [APP_CONFIG], useFactory: (config: AppConfig) => queueOptions(config) }),
    ...ALL_QUEUES.map((name) => BullModule.registerQueue({ name })),
  ],
  exports: [BullModule],
})
export class QueuesModule {}
