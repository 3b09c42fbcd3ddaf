import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { RunStatus } from './run-status';
import { RunRow, RunTransitionsRepository } from './run-transitions.repository';

export type ClaimResult =
  | { kind: 'claimed'; run: RunRow; project: { id: string; name: string; workspace_path: string } }
  | { kind: 'skip'; reason: string }
  | { kind: 'later'; delayMs: number; reason: string };

const RUNNABLE = [RunStatus.QUEUED, RunStatus.RETRYING, RunStatus.RUNNING];

/**
 * The claim: one conditional UPDATE that takes a QUEUED/RETRYING run — or a RUNNING one whose
 * holder's lease expired — stores a fencing token newer than any before, counts the attempt and
 * sets the lease. The project row is locked first so that the per-project cap is counted against
 * committed claims (two workers cannot both see a free slot).
 */
@Injectable()
export class RunClaimService {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly transitions: RunTransitionsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async claim(runId: string, redisToken: number, owner: string, workerId: string): Promise<ClaimResult> {
    return this.ds.transaction(async (em) => {
      const projects: Array<{ id: string; name: string; workspace_path: string; max_concurrent_runs: number }> = await em.query(
        `SELECT p.id, p.name, p.workspace_path, p.max_concurrent_runs
           FROM runs r JOIN projects p ON p.id = r.project_id WHERE r.id = $1 FOR UPDATE OF p`,
        [runId],
      );
      const project = projects[0];
      if (!project) return { kind: 'skip', reason: 'run not found' };
      const run = await this.transitions.transition(
        runId,
        {
          to: RunStatus.RUNNING,
          from: RUNNABLE,
          // Redis may have lost its counters (restart without persistence): Postgres keeps the
          // token monotonic whatever Redis hands out.
          set: [
            'attempts = r.attempts + 1',
            'fencing_token = GREATEST(r.fencing_token + 1, $7::bigint)',
            'lease_owner = $8',
            "lease_expires_at = now() + $9 * interval '1 millisecond'",
            'started_at = COALESCE(r.started_at, now())',
          ],
          where: `(r.status <> 'RUNNING' OR r.lease_expires_at IS NULL OR r.lease_expires_at < now())
            AND (SELECT count(*) FROM runs o WHERE o.project_id = r.project_id AND o.status = 'RUNNING'
                   AND o.id <> r.id AND o.lease_expires_at > now()) < $10`,
          params: [redisToken, owner, this.config.runLockTtlMs, project.max_concurrent_runs],
          workerId,
          reason: 'claimed',
        },
        em,
      );
      if (run) return { kind: 'claimed', run, project };
      return this.whyNot(em.query.bind(em), runId, project.max_concurrent_runs);
    });
  }

  private async whyNot(query: (sql: string, p: unknown[]) => Promise<any[]>, runId: string, cap: number): Promise<ClaimResult> {
    const rows: Array<{ status: RunStatus; lease_ms: number | null; running: string }> = await query(
      `SELECT r.status,
              EXTRACT(EPOCH FROM (r.lease_expires_at - now())) * 1000 AS lease_ms,
              (SELECT count(*) FROM runs o WHERE o.project_id = r.project_id AND o.status = 'RUNNING'
                 AND o.id <> r.id AND o.lease_expires_at > now()) AS running
         FROM runs r WHERE r.id = $1`,
      [runId],
    );
    const r = rows[0];
    if (!r) return { kind: 'skip', reason: 'run not found' };
    if (r.status === RunStatus.RUNNING && r.lease_ms !== null && Number(r.lease_ms) > 0) {
      // A live holder we could not see in Redis (Redis lost its keys?): look again after its lease.
      return { kind: 'later', delayMs: Math.ceil(Number(r.lease_ms)) + 100, reason: 'held by a live lease' };
    }
    if ((r.status === RunStatus.QUEUED || r.status === RunStatus.RETRYING) && Number(r.running) >= cap) {
      return { kind: 'later', delayMs: 200 + Math.floor(Math.random() * 800), reason: 'project at max_concurrent_runs' };
    }
    return { kind: 'skip', reason: `run is ${r.status}` };
  }
}
