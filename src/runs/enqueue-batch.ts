import { InjectQueue } from '@nestjs/bull';
import { Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { Batcher } from '../common/batcher';
import { MetricsService } from '../metrics/metrics.service';
import { runJobId } from '../queues/job-ids';
import { RUNS_QUEUE, RunJobData } from '../queues/queue-names';
import { DispatchView } from './dispatch.view';
import { addRunJobs } from './run-jobs';
import { RunStatus } from './run-status';
import type { RunRow } from './run-transitions.repository';

/** Most jobs in one addBulk. */
const ENQUEUE_BATCH_MAX = 100;

/**
 * The jobs of runs committed QUEUED (born dispatched: a webhook's task, `dispatch: true`): the adds
 * a process asks for in the same turn of its event loop go to Bull as ONE addBulk (under load,
 * several new items per turn). Never rejects: a lost add is logged and the run, QUEUED in Postgres,
 * is the reconciler's to enqueue. The same job id twice is one job (Bull drops the second).
 */
@Injectable()
export class EnqueueBatch {
  private readonly logger = new Logger(EnqueueBatch.name);
  private readonly batcher: Batcher<RunJobData, null>;

  constructor(@InjectQueue(RUNS_QUEUE) queue: Queue<RunJobData>, metrics: MetricsService) {
    this.batcher = new Batcher(
      async (jobs) => {
        await addRunJobs(queue, jobs, this.logger);
        return jobs.map(() => null);
      },
      {
        maxSize: ENQUEUE_BATCH_MAX,
        key: (job) => runJobId(job.runId, job.generation),
        isolate: () => false,
        onBatch: (size) => metrics.enqueueBatchSize.observe(size),
      },
    );
  }

  async enqueue(row: Pick<RunRow, 'id' | 'dispatch_generation'>): Promise<DispatchView> {
    const jobId = runJobId(row.id, row.dispatch_generation);
    try {
      await this.batcher.submit({ runId: row.id, generation: row.dispatch_generation });
    } catch (err) {
      // QUEUED in Postgres is the promise; the reconciler re-enqueues runs that have no job.
      this.logger.error({ msg: 'enqueue failed; the reconciler will retry', runId: row.id, jobId, err: String(err) });
    }
    return { runId: row.id, status: RunStatus.QUEUED, jobId };
  }
}
