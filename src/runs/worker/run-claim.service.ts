import { Inject, Injectable } from '@nestjs/common';
import { isUUID } from 'class-validator';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { RunStatus } from '../run-status';
import { ClaimBatch } from './claim-batch';
import { ClaimedRun } from './run-claim.repository';
import { RunWorkerRepository } from './run-worker.repository';

export type ClaimResult =
  | { kind: 'claimed'; run: ClaimedRun; project: { id: string; name: string; workspace_path: string } }
  | { kind: 'skip'; reason: string }
  | { kind: 'later'; delayMs: number; reason: string };

/**
 * The claim: one conditional UPDATE that takes a QUEUED/RETRYING run — or a RUNNING one whose
 * holder's lease expired — stores a fencing token newer than any before, counts the attempt and
 * sets the lease, under the project's max_concurrent_runs; shared with the claims this process
 * makes at the same moment (ClaimBatch, RunClaimRepository.claimMany). When it does not happen,
 * the run's state says whether to drop the job or look again later.
 */
@Injectable()
export class RunClaimService {
  constructor(
    private readonly runs: RunWorkerRepository,
    private readonly batch: ClaimBatch,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async claim(runId: string, redisToken: number, owner: string, workerId: string): Promise<ClaimResult> {
    // The claim's round trip inlines the run id as a literal: escaped, and a UUID anyway.
    if (!isUUID(runId)) return { kind: 'skip', reason: 'run not found' };
    const leaseMs = this.config.runs.lockTtlMs;
    const claimed = await this.batch.claim({ runId, redisToken, owner, leaseMs, workerId });
    if (!claimed) return this.whyNot(runId);
    const { project_name: name, project_workspace_path: workspace_path, ...run } = claimed;
    return { kind: 'claimed', run, project: { id: run.project_id, name, workspace_path } };
  }

  /** Extends the claim's lease while the attempt runs; false: cancelled or fenced out (stop). */
  extendLease(runId: string, fencingToken: string): Promise<boolean> {
    return this.runs.extendLease(runId, fencingToken, this.config.runs.lockTtlMs);
  }

  private async whyNot(runId: string): Promise<ClaimResult> {
    const r = await this.runs.leaseState(runId);
    if (!r) return { kind: 'skip', reason: 'run not found' };
    if (r.status === RunStatus.RUNNING && r.leaseMs !== null && r.leaseMs > 0) {
      // A live holder we could not see in Redis (Redis lost its keys?): look again after its lease.
      return { kind: 'later', delayMs: Math.ceil(r.leaseMs) + 100, reason: 'held by a live lease' };
    }
    if (r.status === RunStatus.QUEUED || r.status === RunStatus.RETRYING) {
      // Runnable, so the cap held it back. (Read after the claim's transaction: a slot may have
      // freed since — that is a reason to come back soon, never to drop the job.)
      return {
        kind: 'later',
        delayMs: 200 + Math.floor(Math.random() * 800),
        reason: 'project at max_concurrent_runs',
      };
    }
    return { kind: 'skip', reason: `run is ${r.status}` };
  }
}
