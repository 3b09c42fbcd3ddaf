import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import type Redis from 'ioredis';
import { hostname } from 'node:os';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { LockService } from './lock.service';
import { LOCK_SERVICE, REDIS_CLIENT } from './locks.tokens';
import { LOCK_CONNECTIONS, newRedisClient } from './redis-clients';
import { ProcessorGuardCheck } from './processor-guard.check';
import { TaskLockService } from './task-lock.service';

/** Identifies this process in lock owners, leases and run events. */
export const WORKER_ID = Symbol('WORKER_ID');
/** The lock service's connections besides REDIS_CLIENT (which is the first of them). */
const EXTRA_LOCK_CLIENTS = Symbol('EXTRA_LOCK_CLIENTS');

@Global()
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: WORKER_ID, useFactory: () => `${hostname()}:${process.pid}` },
    {
      provide: REDIS_CLIENT,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => newRedisClient(config.redis.url),
    },
    {
      provide: EXTRA_LOCK_CLIENTS,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) =>
        Array.from({ length: LOCK_CONNECTIONS - 1 }, () => newRedisClient(config.redis.url)),
    },
    {
      provide: LOCK_SERVICE,
      inject: [REDIS_CLIENT, EXTRA_LOCK_CLIENTS, APP_CONFIG, WORKER_ID],
      useFactory: (redis: Redis, extra: Redis[], config: AppConfig, workerId: string) =>
        new LockService([redis, ...extra], config.redis.prefix, workerId),
    },
    TaskLockService,
    ProcessorGuardCheck,
  ],
  exports: [REDIS_CLIENT, LOCK_SERVICE, WORKER_ID, TaskLockService],
})
export class LocksModule implements OnApplicationShutdown {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @Inject(EXTRA_LOCK_CLIENTS) private readonly extra: Redis[],
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.redis, ...this.extra].map((r) => r.quit().catch(() => r.disconnect())));
  }
}
