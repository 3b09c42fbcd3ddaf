import { InjectQueue } from '@nestjs/bull';
import { Controller, Get, Inject, Logger, Res, ServiceUnavailableException } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import {
  HealthCheck,
  HealthCheckResult,
  HealthCheckService,
  HealthIndicatorFunction,
  HealthIndicatorResult,
  HealthIndicatorService,
} from '@nestjs/terminus';
import type { Queue } from 'bull';
import type { Response } from 'express';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { ApiPublic } from '../common/openapi';
import { withTimeout } from '../common/with-timeout';
import { where } from '../common/preflight';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { REDIS_CLIENT } from '../locks/locks.tokens';
import { NOTIFICATIONS_QUEUE, RUNS_QUEUE } from '../queues/queue-names';
import { CheckTransitions } from './check-transitions';

const CHECK_TIMEOUT_MS = 2000;

function within<T>(p: Promise<T>, ms = CHECK_TIMEOUT_MS): Promise<T> {
  return withTimeout(p, ms, 'the check', `timed out after ${ms} ms`);
}

/**
 * Unauthenticated and not logged: live = the process answers; ready = Postgres, Redis, queues.
 * Anyone who reaches the port may probe, so the answer says only `up` or `down` per check; the
 * reason (with hosts and ports) goes to the log when a check changes state.
 */
@ApiTags('health')
@Controller('health')
export class HealthController {
  private readonly transitions = new CheckTransitions(new Logger('Readiness'));

  constructor(
    private readonly health: HealthCheckService,
    private readonly indicator: HealthIndicatorService,
    @InjectDataSource() private readonly ds: DataSource,
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @InjectQueue(RUNS_QUEUE) private readonly runs: Queue,
    @InjectQueue(NOTIFICATIONS_QUEUE) private readonly notifications: Queue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
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
      () => this.probe('postgres', this.config.database.url, () => this.ds.query('SELECT 1')),
      () => this.probe('redis', this.config.redis.url, () => this.redis.ping()),
      () => this.probe(`queue:${RUNS_QUEUE}`, this.config.redis.url, () => this.runs.getJobCounts()),
      () => this.probe(`queue:${NOTIFICATIONS_QUEUE}`, this.config.redis.url, () => this.notifications.getJobCounts()),
    ]);
  }

  /**
   * Terminus throws its 503 with the result as the body; answer it here, as terminus JSON (which
   * check is down), rather than let the global filter turn an expected outage into an "internal error".
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

  private async probe(key: string, serviceUrl: string, check: () => Promise<unknown>): Promise<HealthIndicatorResult> {
    const ind = this.indicator.check(key);
    try {
      await within(check());
      this.transitions.up(key);
      return ind.up();
    } catch (err) {
      this.transitions.down(key, err, where(serviceUrl));
      return ind.down();
    }
  }
}
