import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import Redis from 'ioredis';
import { hostname } from 'node:os';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { LOCK_REDIS_OPTIONS, LockService } from './lock.service';
import { LOCK_SERVICE, REDIS_CLIENT } from './locks.tokens';
import { ProcessorGuardCheck } from './processor-guard.check';
import { TaskLockService } from './task-lock.service';

/** Identifies this process in lock owners, leases and run events. */
export const WORKER_ID = Symbol('WORKER_ID');

@Global()
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: WORKER_ID, useFactory: () => `${hostname()}:${process.pid}` },
    {
      provide: REDIS_CLIENT,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => new Redis(config.redis.url, LOCK_REDIS_OPTIONS),
    },
    {
      provide: LOCK_SERVICE,
      inject: [REDIS_CLIENT, APP_CONFIG, WORKER_ID],
      useFactory: (redis: Redis, config: AppConfig, workerId: string) =>
        new LockService(redis, config.redis.prefix, workerId),
    },
    TaskLockService,
    ProcessorGuardCheck,
  ],
  exports: [REDIS_CLIENT, LOCK_SERVICE, WORKER_ID, TaskLockService],
})
export class LocksModule implements OnApplicationShutdown {
  constructor(@Inject(REDIS_CLIENT) private readonly redis: Redis) {}

  async onApplicationShutdown(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
