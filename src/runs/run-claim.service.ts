import { Inject, Injectable } from '@nestjs/common';
import { isUUID } from 'class-validator';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { lastRowsOfOneTrip } from '../database/pg-statements';
import { RunStatus } from './run-status';
import { RunRow, RunTransitionsRepository, TransitionSpec } from './run-transitions.repository';

export type ClaimResult =
  | { kind: 'claimed'; run: RunRow; project: { id: string; name: string; workspace_path: string } }
  | { kind: 'skip'; reason: string }
  | { kind: 'later'; delayMs: number; reason: string };

const RUNNABLE = [RunStatus.QUEUED, RunStatus.RETRYING, RunStatus.RUNNING];

type ClaimedRow = RunRow & { project_name: string; project_workspace_path: string };

/**
 * The claim: one conditional UPDATE that takes a QUEUED/RETRYING run — or a RUNNING one whose
 * holder's lease expired — stores a fencing token newer than any before, counts the attempt and
 * sets the lease. The project row is locked first so that the per-project cap is counted against
 * committed claims (two workers cannot both see a free slot).
 *
 * Both statements travel in ONE round trip (lastRowsOfOneTrip): one implicit transaction, and
 * the claim's snapshot is taken after the project lock was granted, so it sees the claims of
 * whoever held that lock before (test/run-claim.e2e-spec.ts races claims against caps 1–3).
 */
@Injectable()
export class RunClaimService {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly transitions: RunTransitionsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async claim(runId: string, redisToken: number, owner: string, workerId: string): Promise<ClaimResult> {
    // The run id is inlined as a literal (see lastRowsOfOneTrip): escaped, and a UUID anyway.
    if (!isUUID(runId)) return { kind: 'skip', reason: 'run not found' };
    const spec: TransitionSpec = {
      to: RunStatus.RUNNING,
      from: RUNNABLE,
      // Redis may have lost its counters (restart without persistence): Postgres keeps the
      // token monotonic whatever Redis hands out.
      set: [
        'attempts = r.attempts + 1',
        'fencing_token = GREATEST(r.fencing_token + 1, $7::bigint)',
        'lease_owner = $8::text',
        "lease_expires_at = now() + $9::int * interval '1 millisecond'",
        'started_at = COALESCE(r.started_at, now())',
      ],
      where: `(r.status <> 'RUNNING' OR r.lease_expires_at IS NULL OR r.lease_expires_at < now())
        AND (SELECT count(*) FROM runs o WHERE o.project_id = r.project_id AND o.status = 'RUNNING'
               AND o.id <> r.id AND o.lease_expires_at > now())
          < (SELECT p.max_concurrent_runs FROM projects p WHERE p.id = r.project_id)`,
      params: [redisToken, owner, this.config.runLockTtlMs],
      output: { columns: ', p.name AS project_name, p.workspace_path AS project_workspace_path', join: 'JOIN projects p ON p.id = upd.project_id' },
      workerId,
      reason: 'claimed',
    };
    const rows = await lastRowsOfOneTrip<ClaimedRow>(this.ds, [
      { text: 'SELECT p.id FROM runs r JOIN projects p ON p.id = r.project_id WHERE r.id = $1 FOR UPDATE OF p', values: [runId] },
      this.transitions.statement(runId, spec),
    ]);
    const claimed = this.transitions.counted(spec, rows[0] ?? null);
    if (!claimed) return this.whyNot(runId);
    const { project_name: name, project_workspace_path: workspace_path, ...run } = claimed;
    return { kind: 'claimed', run, project: { id: run.project_id, name, workspace_path } };
  }

  private async whyNot(runId: string): Promise<ClaimResult> {
    const rows: Array<{ status: RunStatus; lease_ms: number | null }> = await this.ds.query(
      `SELECT r.status, EXTRACT(EPOCH FROM (r.lease_expires_at - now())) * 1000 AS lease_ms FROM runs r WHERE r.id = $1`,
      [runId],
    );
    const r = rows[0];
    if (!r) return { kind: 'skip', reason: 'run not found' };
    if (r.status === RunStatus.RUNNING && r.lease_ms !== null && Number(r.lease_ms) > 0) {
      // A live holder we could not see in Redis (Redis lost its keys?): look again after its lease.
      return { kind: 'later', delayMs: Math.ceil(Number(r.lease_ms)) + 100, reason: 'held by a live lease' };
    }
    if (r.status === RunStatus.QUEUED || r.status === RunStatus.RETRYING) {
      // Runnable, so the cap held it back. (Read after the claim's transaction: a slot may have
      // freed since — that is a reason to come back soon, never to drop the job.)
      return { kind: 'later', delayMs: 200 + Math.floor(Math.random() * 800), reason: 'project at max_concurrent_runs' };
    }
    return { kind: 'skip', reason: `run is ${r.status}` };
  }
}
