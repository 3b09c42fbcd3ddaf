import { Injectable } from '@nestjs/common';
import { Batcher } from '../../common/batcher';
import { isTransientDbError } from '../../database/pg-errors';
import { MetricsService } from '../../metrics/metrics.service';
import { ClaimedRow, ClaimRequest, RunClaimRepository } from './run-claim.repository';

// As for finalizes: the worker's concurrency bounds what can meet in one turn; the cap keeps one
// statement's arrays and row locks small when that is set high.
export const CLAIM_BATCH_MAX = 64;

/**
 * Group commit of the worker's claims: the claims this process makes in the same turn of the event
 * loop go to Postgres as ONE round trip (RunClaimRepository.claimMany), each run still conditional
 * on its own status and lease, the projects' caps holding for the batch as a whole. Each caller
 * gets its own row, or null: not claimed (the caller reads why). A connection error fails every
 * caller of the batch, as it would a lone claim; any other error is its row's, so the rows are sent
 * again one by one (the failed round trip was one transaction and changed nothing).
 */
@Injectable()
export class ClaimBatch {
  private readonly batcher: Batcher<ClaimRequest, ClaimedRow | null>;

  constructor(
    private readonly runs: RunClaimRepository,
    metrics: MetricsService,
  ) {
    this.batcher = new Batcher((reqs) => this.send(reqs), {
      maxSize: CLAIM_BATCH_MAX,
      // Two claims of one run in one statement would both read it claimable; the second waits its turn.
      key: (r) => r.runId,
      isolate: (err) => !isTransientDbError(err),
      onBatch: (size) => metrics.claimBatchSize.observe(size),
    });
  }

  claim(req: ClaimRequest): Promise<ClaimedRow | null> {
    return this.batcher.submit(req);
  }

  private async send(reqs: ClaimRequest[]): Promise<Array<ClaimedRow | null>> {
    const rows = new Map((await this.runs.claimMany(reqs)).map((r) => [r.id, r]));
    return reqs.map((r) => rows.get(r.runId) ?? null);
  }
}
