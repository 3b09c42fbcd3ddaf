import { Inject, Injectable } from '@nestjs/common';
import { Batcher } from '../common/batcher';
import { isTransientDbError, pgErrorCode } from '../database/pg-errors';
import { BulkDispatchService } from './bulk-dispatch.service';
import { BULK_DISPATCH_MAX } from './dto/bulk-dispatch.dto';
import { DISPATCH_GUARD_TTL_MS, dispatchGuardKey, whyNotDispatchable } from './dispatch-rules';
import {
  DISPATCH_IN_PROGRESS,
  dispatchInProgress,
  runNotFound,
  RunsError,
  RunsErrorCode,
  RunsRefusal,
} from './runs.errors';
import { LOCK_SERVICE } from '../locks/locks.tokens';
import { WORKER_ID } from '../locks/locks.module';
import { LockService } from '../locks/lock.service';
import { MetricsService } from '../metrics/metrics.service';
import { RunStatus } from './run-status';
import { RunRow, RunTransitionsRepository } from './run-transitions.repository';
import { BulkDispatchItem } from './bulk-dispatch.view';
import { DispatchView } from './dispatch.view';
import { EnqueueBatch } from './enqueue-batch';
import { RunsRepository } from './runs.repository';

/**
 * Dispatch = producer guard (short SET NX: a storm of clicks does the work once) → conditional
 * PENDING→QUEUED that bumps the dispatch generation → Bull add with the generation's job id.
 * Postgres is the truth: if the add is lost (Redis down) the run stays QUEUED and the reconciler
 * enqueues it again.
 *
 * Group commit: the dispatches this process is asked for in the same turn of the event loop (a
 * burst of requests, a producer dispatching many runs) go out as ONE bulk dispatch — one pipelined
 * guard round trip, one conditional statement, one addBulk — and each caller still gets its own
 * answer, the one its dispatch alone would have had (BulkDispatchService answers per run).
 *
 * A dispatch of a run that this process is dispatching already (a double click, a client's retry,
 * a storm) is refused here, as the run's guard would refuse it: the first holds that guard, or is
 * about to take it ahead of the twin on the same connection, until its answer. So a twin costs no
 * batch and no round trip; across processes the guard and Postgres decide, as before.
 */
@Injectable()
export class DispatchService {
  private readonly batcher: Batcher<string, BulkDispatchItem>;
  /** Runs with a dispatch from this process in flight (lower case). */
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly runs: RunsRepository,
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    private readonly transitions: RunTransitionsRepository,
    private readonly metrics: MetricsService,
    @Inject(WORKER_ID) private readonly workerId: string,
    bulk: BulkDispatchService,
    private readonly enqueues: EnqueueBatch,
  ) {
    this.batcher = new Batcher(async (runIds) => (await bulk.dispatch(runIds)).items, {
      maxSize: BULK_DISPATCH_MAX,
      // Two dispatches of one run never share a batch: the second is its own, and meets the guard.
      key: (runId) => runId,
      // A statement that failed for what one run asked (not a lost connection): each alone, so
      // that only its caller sees the error.
      isolate: (err) => pgErrorCode(err) !== undefined && !isTransientDbError(err),
      onBatch: (size) => metrics.dispatchBatchSize.observe(size),
    });
  }

  /** PENDING → QUEUED, answered 202, or refused with the RunsError the route maps to 404/409. */
  async dispatch(runId: string): Promise<DispatchView> {
    const answer = await this.dispatchOrRefuse(runId);
    if ('code' in answer) throw new RunsError(answer.code, answer.message);
    return answer;
  }

  /**
   * dispatch() for callers in this process that take a refusal as the normal answer it is (a
   * duplicate dispatch is one): the refusal comes back as a value, without an Error's stack.
   */
  async dispatchOrRefuse(runId: string): Promise<DispatchView | RunsRefusal> {
    // Postgres spells a UUID in lower case; the batch's items are matched by it.
    const id = runId.toLowerCase();
    if (this.inFlight.has(id)) {
      this.metrics.duplicate('producer_guard');
      return DISPATCH_IN_PROGRESS;
    }
    this.inFlight.add(id);
    try {
      const item = await this.batcher.submit(id);
      return 'error' in item ? item.error : item;
    } finally {
      this.inFlight.delete(id);
    }
  }

  /** FAILED → QUEUED: a new attempt series (attempts start again from zero). */
  retry(runId: string): Promise<DispatchView> {
    return this.guarded(runId, [RunStatus.FAILED], 'retry requested', [
      'attempts = 0',
      'last_error = NULL',
      'finished_at = NULL',
    ]);
  }

  private async guarded(
    runId: string,
    from: RunStatus[],
    reason: string,
    extraSets: string[] = [],
  ): Promise<DispatchView> {
    const guardKey = dispatchGuardKey(runId);
    const owner = await this.locks.enterGuard(guardKey, DISPATCH_GUARD_TTL_MS);
    if (!owner) {
      this.metrics.duplicate('producer_guard');
      throw dispatchInProgress();
    }
    try {
      const row = await this.transitions.transition(runId, {
        to: RunStatus.QUEUED,
        from,
        set: ['dispatch_generation = r.dispatch_generation + 1', ...extraSets],
        workerId: this.workerId,
        reason,
      });
      if (!row) return await this.refuse(runId, from);
      return await this.enqueue(row);
    } finally {
      await this.locks.leaveGuard(guardKey, owner).catch(() => undefined);
    }
  }

  /** Adds the Bull job for a run already QUEUED in Postgres. Safe to repeat: same id, one job. */
  enqueue(row: Pick<RunRow, 'id' | 'dispatch_generation'>): Promise<DispatchView> {
    return this.enqueues.enqueue(row);
  }

  private async refuse(runId: string, from: RunStatus[]): Promise<never> {
    const status = await this.runs.statusOf(runId);
    if (!status) throw runNotFound(runId);
    this.metrics.duplicate('claim');
    const why =
      from.includes(RunStatus.FAILED) && status !== RunStatus.FAILED
        ? `only a FAILED run can be retried; run is ${status}`
        : whyNotDispatchable(status);
    throw new RunsError(RunsErrorCode.RUN_NOT_DISPATCHABLE, why);
  }
}
