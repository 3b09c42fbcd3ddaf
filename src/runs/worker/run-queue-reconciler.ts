import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { Queue } from 'bull';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { runJobId } from '../../queues/job-ids';
import { RUNS_QUEUE, RunJobData } from '../../queues/queue-names';
import { ScheduledTasks } from '../../scheduler/scheduled-tasks.service';
import { DispatchService } from '../dispatch.service';
import { RunWorkerRepository } from './run-worker.repository';

export const RECONCILE_TASK = 'runs.reconcile-queue';
const LIVE_JOB_STATES = new Set(['waiting', 'active', 'delayed', 'paused']);
const BATCH = 200;

/**
 * Postgres is the truth and Redis is rebuilt from it: QUEUED/RETRYING runs that have no live Bull
 * job (Redis restarted without persistence, a flushed queue, an add lost to a Redis outage) are
 * enqueued again under a new generation's job id, so a leftover completed/failed job cannot
 * swallow the add.
 */
@Injectable()
export class RunQueueReconciler implements OnModuleInit {
  private readonly logger = new Logger(RunQueueReconciler.name);

  constructor(
    private readonly runs: RunWorkerRepository,
    @InjectQueue(RUNS_QUEUE) private readonly queue: Queue<RunJobData>,
    private readonly dispatcher: DispatchService,
    private readonly scheduled: ScheduledTasks,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(RECONCILE_TASK, () => this.reconcileQueue());
  }

  async reconcileQueue(): Promise<{ requeued: number }> {
    const graceMs = Math.max(2 * this.config.queue.reconcileIntervalMs, 2000);
    let requeued = 0;
    for (const run of await this.runs.findWaiting(graceMs, BATCH)) {
      const job = await this.queue.getJob(runJobId(run.id, run.dispatch_generation));
      if (job && LIVE_JOB_STATES.has(await job.getState())) continue;
      const bumped = await this.runs.bumpGeneration(run.id, run.dispatch_generation);
      if (!bumped) continue;
      await this.dispatcher.enqueue(bumped);
      requeued++;
      this.logger.warn({
        msg: 're-enqueued a run that had no live job',
        runId: run.id,
        generation: bumped.dispatch_generation,
      });
    }
    return { requeued };
  }
}
