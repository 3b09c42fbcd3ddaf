import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';
import { ScheduledTasks } from '../scheduler/scheduled-tasks.service';
import { NotificationClaimsRepository } from './notification-claims.repository';
import { NotificationKicker } from './notification-kicker';

export const NOTIFICATION_SWEEP_TASK = 'notifications.sweep';

/** Rows re-enqueued per sweep; the rest wait for the next one. */
const SWEEP_BATCH = 500;

/**
 * The safety net under the kick: every RECONCILE_INTERVAL_MS (on one replica) it re-enqueues due
 * rows that nobody claimed for a whole interval — their kick or job was lost (Redis down at
 * commit, a job failed by stall detection, a flushed Redis) — and fails rows whose final attempt
 * died with its deliverer.
 */
@Injectable()
export class NotificationSweeper implements OnModuleInit {
  private readonly logger = new Logger(NotificationSweeper.name);

  constructor(
    private readonly scheduled: ScheduledTasks,
    private readonly claims: NotificationClaimsRepository,
    private readonly kicker: NotificationKicker,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(NOTIFICATION_SWEEP_TASK, () => this.sweep());
  }

  async sweep(): Promise<{ requeued: number; failed: number }> {
    if (!this.config.notify.slackWebhookUrl) return { requeued: 0, failed: 0 };
    const max = this.config.notify.maxAttempts;
    const failed = await this.claims.failExhausted(max);
    if (failed > 0) {
      this.metrics.notifications.inc({ outcome: 'failed' }, failed);
      this.logger.error({ msg: 'notifications FAILED: final attempt interrupted', count: failed });
    }
    // A healthy job claims its row within moments of it falling due; one interval of grace
    // keeps the sweeper from shadowing every scheduled retry with a second job.
    const graceMs = Math.min(this.config.queue.reconcileIntervalMs, 30_000);
    const lost = await this.claims.lost(graceMs, max, SWEEP_BATCH);
    for (const row of lost) await this.kicker.enqueue(row.id, row.attempts);
    if (lost.length > 0) this.logger.warn({ msg: 'due notifications re-enqueued', count: lost.length });
    return { requeued: lost.length, failed };
  }
}
