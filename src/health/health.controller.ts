import { InjectQueue } from '@nestjs/bull';
import { Controller, Get, Inject } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorResult, HealthIndicatorService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import type { Queue } from 'bull';
import Redis from 'ioredis';
import { REDIS_CLIENT } from '../locks/locks.tokens';
import { NOTIFICATIONS_QUEUE, RUNS_QUEUE } from '../queues/queue-names';

const CHECK_TIMEOUT_MS = 2000;

function within<T>(p: Promise<T>, ms = CHECK_TIMEOUT_MS): Promise<T> {
  return Promise.race([p, new Promise<T>((_, rej) => setTimeout(() => rej(new Error(`timed out after ${ms} ms`)), ms).unref())]);
}

/** Unauthenticated and not logged: live = the process answers; ready = Postgres, Redis, queues. */
@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
    private readonly indicator: HealthIndicatorService,
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @InjectQueue(RUNS_QUEUE) private readonly runs: Queue,
    @InjectQueue(NOTIFICATIONS_QUEUE) private readonly notifications: Queue,
  ) {}

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([]);
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([
      () => this.db.pingCheck('postgres', { timeout: CHECK_TIMEOUT_MS }),
      () => this.probe('redis', () => this.redis.ping()),
      () => this.probe(`queue:${RUNS_QUEUE}`, () => this.runs.getJobCounts()),
      () => this.probe(`queue:${NOTIFICATIONS_QUEUE}`, () => this.notifications.getJobCounts()),
    ]);
  }

  private async probe(key: string, check: () => Promise<unknown>): Promise<HealthIndicatorResult> {
    const ind = this.indicator.check(key);
    try {
      await within(check());
      return ind.up();
    } catch (err) {
      return ind.down({ message: (err as Error).message });
    }
  }
}
