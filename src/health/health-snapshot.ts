import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Queue } from 'bull';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { queryRows } from '../database/query-rows';
import { REDIS_CLIENT } from '../locks/locks.tokens';
import { MetricsService } from '../metrics/metrics.service';
import { NOTIFICATIONS_QUEUE, RUNS_QUEUE } from '../queues/queue-names';
import { RUN_STATUSES } from '../runs/run-status';
import { ScheduledTasks } from '../scheduler/scheduled-tasks.service';

export const SNAPSHOT_TASK = 'health.snapshot';

/**
 * A scheduled health snapshot into metrics (runs by status, queue depth) with a log line when
 * health changes. Each module prunes its own rows; Bull prunes its own finished jobs.
 */
@Injectable()
export class HealthSnapshot implements OnModuleInit {
  private readonly logger = new Logger(HealthSnapshot.name);
  private lastHealth = '';

  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @InjectQueue(RUNS_QUEUE) private readonly runs: Queue,
    @InjectQueue(NOTIFICATIONS_QUEUE) private readonly notifications: Queue,
    private readonly metrics: MetricsService,
    private readonly scheduled: ScheduledTasks,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(SNAPSHOT_TASK, () => this.snapshot());
  }

  async snapshot(): Promise<string> {
    const health: string[] = [];
    try {
      const rows = await queryRows<{ status: string; n: number }>(
        this.ds,
        'SELECT status, count(*)::int AS n FROM runs GROUP BY status',
      );
      for (const s of RUN_STATUSES)
        this.metrics.runsByStatus.set({ status: s }, rows.find((r) => r.status === s)?.n ?? 0);
      health.push('postgres=up');
    } catch {
      health.push('postgres=down');
    }
    try {
      await this.redis.ping();
      for (const q of [this.runs, this.notifications]) {
        const counts = await q.getJobCounts();
        for (const [state, n] of Object.entries(counts)) this.metrics.queueDepth.set({ queue: q.name, state }, n);
      }
      health.push('redis=up');
    } catch {
      health.push('redis=down');
    }
    const now = health.join(' ');
    if (now !== this.lastHealth)
      this.logger.log({ msg: 'health changed', health: now, was: this.lastHealth || 'unknown' });
    this.lastHealth = now;
    return now;
  }
}
