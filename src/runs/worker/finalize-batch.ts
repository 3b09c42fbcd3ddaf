import { Injectable } from '@nestjs/common';
import { Batcher } from '../../common/batcher';
import { isTransientDbError } from '../../database/pg-errors';
import { MetricsService } from '../../metrics/metrics.service';
import { FinalizedRow, FinalizeWrite, RunWorkerRepository } from './run-worker.repository';

// A worker's concurrency (WORKER_CONCURRENCY, 32 by default) bounds how many finalizes can meet in
// one turn; the cap keeps one statement's arrays and row locks small when that is set high.
export const FINALIZE_BATCH_MAX = 64;

/**
 * Group commit of the worker's finalizes: the finalizes this process makes in the same turn of the
 * event loop go to Postgres as ONE statement (RunWorkerRepository.finalizeMany), each run still
 * fenced and conditional on its own. Each caller gets its own row, or null: fenced out. A
 * connection error fails every caller of the batch, and each one's retry then settles its own run;
 * any other error is its row's, so the rows are sent again one by one (the failed statement
 * changed nothing).
 */
@Injectable()
export class FinalizeBatch {
  private readonly batcher: Batcher<FinalizeWrite, FinalizedRow | null>;

  constructor(
    private readonly runs: RunWorkerRepository,
    metrics: MetricsService,
  ) {
    this.batcher = new Batcher((writes) => this.send(writes), {
      maxSize: FINALIZE_BATCH_MAX,
      // Two writes of one run in one statement would race inside it; the second waits its turn.
      key: (w) => w.runId,
      isolate: (err) => !isTransientDbError(err),
      onBatch: (size) => metrics.finalizeBatchSize.observe(size),
    });
  }

  write(w: FinalizeWrite): Promise<FinalizedRow | null> {
    return this.batcher.submit(w);
  }

  private async send(writes: FinalizeWrite[]): Promise<Array<FinalizedRow | null>> {
    const rows = new Map((await this.runs.finalizeMany(writes)).map((r) => [r.id, r]));
    return writes.map((w) => rows.get(w.runId) ?? null);
  }
}
