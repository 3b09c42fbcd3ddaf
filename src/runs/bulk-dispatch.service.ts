import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { LockService } from '../locks/lock.service';
import { WORKER_ID } from '../locks/locks.module';
import { LOCK_SERVICE } from '../locks/locks.tokens';
import { MetricsService } from '../metrics/metrics.service';
import { runJobId } from '../queues/job-ids';
import { RUNS_QUEUE, RunJobData } from '../queues/queue-names';
import { BulkDispatchItem, BulkDispatchView } from './bulk-dispatch.view';
import { DISPATCH_GUARD_TTL_MS, dispatchGuardKey, whyNotDispatchable } from './dispatch-rules';
import { DispatchRepository } from './dispatch.repository';
import { addRunJobs } from './run-jobs';
import { RunStatus } from './run-status';
import { DISPATCH_IN_PROGRESS, runNotFoundRefusal, RunsErrorCode, RunsRefusal } from './runs.errors';
import { RunsRepository } from './runs.repository';

const refusal = (runId: string, why: RunsRefusal): BulkDispatchItem => ({
  runId,
  error: { code: why.code, message: why.message },
});

/**
 * Many dispatches at once, with the single route's guarantees and answers per run: the producer
 * guards of all runs in one round trip, ONE conditional PENDING→QUEUED statement for the runs
 * whose guard it holds, ONE Bull addBulk. Postgres is the truth here too: jobs lost with a failed
 * addBulk are enqueued again by the reconciler, because their runs are QUEUED.
 */
@Injectable()
export class BulkDispatchService {
  private readonly logger = new Logger(BulkDispatchService.name);

  constructor(
    private readonly repository: DispatchRepository,
    private readonly runs: RunsRepository,
    @InjectQueue(RUNS_QUEUE) private readonly queue: Queue<RunJobData>,
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    private readonly metrics: MetricsService,
    @Inject(WORKER_ID) private readonly workerId: string,
  ) {}

  /** `runIds` are distinct, lower-case UUIDs (BulkDispatchDto); the items come in their order. */
  async dispatch(runIds: readonly string[]): Promise<BulkDispatchView> {
    const keys = runIds.map(dispatchGuardKey);
    const owners = await this.locks.enterGuards(keys, DISPATCH_GUARD_TTL_MS);
    try {
      const guarded = runIds.filter((_, i) => owners[i] !== null);
      const queued = guarded.length ? await this.repository.queuePending(guarded, this.workerId, 'dispatched') : [];
      const jobIds = new Map(queued.map((r) => [r.id, runJobId(r.id, r.dispatch_generation)]));
      await this.enqueue(queued.map((r) => ({ runId: r.id, generation: r.dispatch_generation })));
      const refused = guarded.filter((id) => !jobIds.has(id));
      const statuses = refused.length ? await this.runs.statusesOf(refused) : new Map<string, RunStatus>();
      const items = runIds.map((runId, i): BulkDispatchItem => {
        const jobId = jobIds.get(runId);
        if (jobId) return { runId, status: RunStatus.QUEUED, jobId };
        if (owners[i] === null) {
          this.metrics.duplicate('producer_guard');
          return refusal(runId, DISPATCH_IN_PROGRESS);
        }
        const status = statuses.get(runId);
        if (!status) return refusal(runId, runNotFoundRefusal(runId));
        this.metrics.duplicate('claim');
        return refusal(runId, { code: RunsErrorCode.RUN_NOT_DISPATCHABLE, message: whyNotDispatchable(status) });
      });
      return { items };
    } finally {
      await this.locks.leaveGuards(keys, owners).catch(() => undefined);
    }
  }

  private async enqueue(jobs: RunJobData[]): Promise<void> {
    try {
      await addRunJobs(this.queue, jobs, this.logger);
    } catch (err) {
      // QUEUED in Postgres is the promise; the reconciler re-enqueues runs that have no job.
      this.logger.error({
        msg: 'bulk enqueue failed; the reconciler will retry',
        runIds: jobs.map((j) => j.runId),
        err: String(err),
      });
    }
  }
}
