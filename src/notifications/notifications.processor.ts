import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { Job, Queue } from 'bull';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { RetryLaterError } from '../locks/retry-later.error';
import { Lease, TaskLockService } from '../locks/task-lock.service';
import { notificationLockKey } from '../queues/job-ids';
import { NOTIFICATIONS_QUEUE, NotificationJobData } from '../queues/queue-names';
import { NotificationDeliveryService } from './notification-delivery.service';

export type NotificationJobOutcome = 'sent' | 'failed' | 'gone';

/**
 * The notifications queue processor: guard (lock notification:<id>, via TaskLockService) →
 * claim → POST → record. A job only completes once its row needs nothing more from it; every
 * "later" (retry, not due, claimed elsewhere) is a RetryLaterError, so the job itself is the timer.
 */
@Injectable()
export class NotificationsProcessor implements OnModuleInit {
  private readonly logger = new Logger(NotificationsProcessor.name);

  constructor(
    @InjectQueue(NOTIFICATIONS_QUEUE) private readonly queue: Queue<NotificationJobData>,
    private readonly taskLock: TaskLockService,
    private readonly delivery: NotificationDeliveryService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    if (!this.config.notify.slackWebhookUrl) {
      // Take no jobs: a replica that has the URL will (rows written here are SKIPPED anyway).
      this.logger.log({ msg: 'SLACK_WEBHOOK_URL is not set: this process delivers no notifications' });
      return;
    }
    this.taskLock.process(this.queue, {
      name: 'notifications',
      // Each delivery is one small POST, mostly waiting on the network.
      concurrency: Math.max(4, this.config.worker.concurrency),
      ttlMs: this.delivery.leaseMs,
      lockKey: (job) => notificationLockKey(job.data.notificationId),
      fencedInPostgres: true,
      handler: (job, lease) => this.handle(job, lease),
    });
  }

  async handle(job: Job<NotificationJobData>, lease: Lease): Promise<NotificationJobOutcome> {
    const result = await this.delivery.deliver(job.data.notificationId, lease.signal);
    switch (result.kind) {
      case 'retry':
        throw new RetryLaterError(result.delayMs, result.error);
      case 'later':
        throw new RetryLaterError(result.delayMs, result.reason);
      case 'skip':
        return 'gone';
      default:
        return result.kind;
    }
  }
}
