import { InjectQueue } from '@nestjs/bull';
import { Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { withTimeout } from '../common/with-timeout';
import { notificationJobId } from '../queues/job-ids';
import { NOTIFICATIONS_QUEUE, NotificationJobData } from '../queues/queue-names';

/** A kick waits no longer than this for Redis: the run's job should not hang on a courtesy. */
const KICK_TIMEOUT_MS = 2000;
/** States in which the job will still run: an add with its id must collapse into it. */
const LIVE_STATES = new Set<string>(['waiting', 'active', 'delayed', 'paused']);

/**
 * Starts delivery of a freshly committed outbox row without waiting for the sweeper. Failing to
 * kick loses nothing: the row is PENDING in Postgres and the sweeper finds it.
 */
@Injectable()
export class NotificationKicker {
  private readonly logger = new Logger(NotificationKicker.name);

  constructor(@InjectQueue(NOTIFICATIONS_QUEUE) private readonly queue: Queue<NotificationJobData>) {}

  /** Never throws: a lost kick is the sweeper's business. */
  async kick(notificationId: string): Promise<void> {
    try {
      await withTimeout(
        this.enqueue(notificationId, 0),
        KICK_TIMEOUT_MS,
        'the kick',
        `no answer from Redis within ${KICK_TIMEOUT_MS} ms`,
      );
    } catch (err) {
      this.logger.warn({
        msg: 'notification kick failed; the sweeper will deliver it',
        notificationId,
        err: String(err),
      });
    }
  }

  /**
   * One job per (row, attempts): a duplicate add while that job lives collapses into it. Bull
   * also drops an add SILENTLY while a completed or failed job keeps the id, which would strand a
   * row that is still PENDING — so such a leftover is removed first. The same goes for a job
   * record that sits in no list at all (`stuck`: a Redis wipe raced Bull's own scripts).
   */
  async enqueue(notificationId: string, attempts: number): Promise<void> {
    const jobId = notificationJobId(notificationId, attempts);
    const existing = await this.queue.getJob(jobId);
    if (existing) {
      const state = await existing.getState();
      if (!LIVE_STATES.has(state)) await existing.remove().catch(() => undefined);
    }
    await this.queue.add({ notificationId }, { jobId });
  }
}
