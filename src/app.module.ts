import { DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LoggerModule } from 'nestjs-pino';
import { AdminModule } from './admin/admin.module';
import { loggerParams } from './common/logging';
import type { AppConfig } from './config/app-config';
import { AppConfigModule } from './config/config.module';
import { DatabaseModule } from './database/database.module';
import { dataSourceOptions } from './database/data-source-options';
import { HealthModule } from './health/health.module';
import { LocksModule } from './locks/locks.module';
import { MetricsModule } from './metrics/metrics.module';
import { NotificationsModule } from './notifications/notifications.module';
import { QueuesModule } from './queues/queues.module';
import { RunsModule } from './runs/runs.module';
import { SchedulerModule } from './scheduler/scheduler.module';
import { TasksModule } from './tasks/tasks.module';
import { WebhooksModule } from './webhooks/webhooks.module';

/** The application for one role; main.ts and the tests build it from a validated config. */
@Module({})
export class AppModule {
  static register(config: AppConfig): DynamicModule {
    // One object each: modules that depend on them import these same objects (see TasksModule).
    const runs = RunsModule.register(config.role);
    const tasks = TasksModule.register(config.role, runs);
    return {
      module: AppModule,
      imports: [
        AppConfigModule.forRoot(config),
        LoggerModule.forRoot(loggerParams(config)),
        TypeOrmModule.forRoot({
          ...dataSourceOptions(config.database.url, config.database.poolSize),
        }),
        DatabaseModule,
        MetricsModule,
        LocksModule,
        QueuesModule,
        SchedulerModule,
        HealthModule,
        NotificationsModule.register(config.role),
        runs,
        tasks,
        WebhooksModule.register(config.role, tasks),
        AdminModule.register(config.role),
      ],
    };
  }
}
