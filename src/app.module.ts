import { DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LoggerModule } from 'nestjs-pino';
import { loggerParams } from './common/logging';
import type { AppConfig } from './config/app-config';
import { AppConfigModule } from './config/config.module';
import { dataSourceOptions } from './database/data-source-options';
import { HealthModule } from './health/health.module';
import { LocksModule } from './locks/locks.module';
import { MetricsModule } from './metrics/metrics.module';
import { NotificationsModule } from './notifications/notifications.module';
import { QueuesModule } from './queues/queues.module';
import { RunsModule } from './runs/runs.module';
import { SchedulerModule } from './scheduler/scheduler.module';

/** The application for one role; main.ts and the tests build it from a validated config. */
@Module({})
export class AppModule {
  static register(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        AppConfigModule.forRoot(config),
        LoggerModule.forRoot(loggerParams(config)),
        TypeOrmModule.forRoot({ ...dataSourceOptions(config.databaseUrl, Math.max(10, config.workerConcurrency * 2 + 5)) }),
        MetricsModule,
        LocksModule,
        QueuesModule,
        SchedulerModule,
        HealthModule,
        NotificationsModule,
        RunsModule.register(config.role),
      ],
    };
  }
}
