import { InjectQueue } from '@nestjs/bull';
import { Controller, Get, Inject, Res, ServiceUnavailableException } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { ApiPublic } from '../common/openapi';
import {
  HealthCheck,
  HealthCheckResult,
  HealthCheckService,
  HealthIndicatorFunction,
  HealthIndicatorResult,
  HealthIndicatorService,
  TypeOrmHealthIndicator,
} from '@nestjs/terminus';
import type { Response } from 'express';
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
  @ApiPublic('Liveness: the process answers')
  @HealthCheck()
  live(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    return this.check(res, []);
  }

  @Get('ready')
  @ApiPublic('Readiness: Postgres, Redis and the queues answer (503 with the failing check otherwise)')
  @HealthCheck()
  ready(@Res({ passthrough: true }) res: Response): Promise<HealthCheckResult> {
    return this.check(res, [
      () => this.db.pingCheck('postgres', { timeout: CHECK_TIMEOUT_MS }),
      () => this.probe('redis', () => this.redis.ping()),
      () => this.probe(`queue:${RUNS_QUEUE}`, () => this.runs.getJobCounts()),
      () => this.probe(`queue:${NOTIFICATIONS_QUEUE}`, () => this.notifications.getJobCounts()),
    ]);
  }

  /**
   * Terminus reports a failed check by throwing a 503 that carries the check result. Answer with that
   * result (which check is down, as @HealthCheck() documents it), not the generic error shape.
   */
  private async check(res: Response, checks: HealthIndicatorFunction[]): Promise<HealthCheckResult> {
    try {
      return await this.health.check(checks);
    } catch (err) {
      if (!(err instanceof ServiceUnavailableException)) throw err;
      res.status(503);
      return err.getResponse() as HealthCheckResult;
    }
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
