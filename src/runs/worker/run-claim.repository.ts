import { Injectable } from '@nestjs/common';
import { bindNamed, prefixed } from '../../database/named-params';
import { PgStatements } from '../../database/pg-statements';
import { assertTransitions } from '../run-state-machine';
import { RunStatus } from '../run-status';
import { RunRow, RunTransitionsRepository } from '../run-transitions.repository';

/** What an attempt needs of its run (the claim returns only these: no output tail, no dates to parse). */
export type ClaimedRun = Pick<
  RunRow,
  'id' | 'project_id' | 'task_id' | 'requirement' | 'status' | 'attempts' | 'fencing_token' | 'from_status'
>;
export type ClaimedRow = ClaimedRun & { project_name: string; project_workspace_path: string };

const CLAIMED_COLUMNS = 'id, project_id, task_id, requirement, status, attempts, fencing_token';

export interface ClaimRequest {
  runId: string;
  /** The token the Redis lock handed out; Postgres keeps the stored one monotonic whatever it is. */
  redisToken: number;
  owner: string;
  leaseMs: number;
  workerId: string;
}

const RUNNABLE = [RunStatus.QUEUED, RunStatus.RETRYING, RunStatus.RUNNING];
// Of the runnable statuses, RUNNING only once its holder's lease expired.
const CLAIMABLE = "(r.status <> 'RUNNING' OR r.lease_expires_at IS NULL OR r.lease_expires_at < now())";

/** The claim of the worker path: runs taken for an attempt, many in one round trip (ClaimBatch). */
@Injectable()
export class RunClaimRepository {
  constructor(
    private readonly statements: PgStatements,
    private readonly transitions: RunTransitionsRepository,
  ) {}

  /**
   * Takes QUEUED/RETRYING runs, or RUNNING ones whose lease expired, under their projects' caps, for
   * many runs in ONE round trip. The first statement locks every involved project row (in id
   * order, so two batches cannot deadlock) FOR NO KEY UPDATE: claims of one project wait for each
   * other, while the key-share locks of inserts that reference the project (a new run, a new
   * task) do not wait for the claim, nor the claim for them; the second takes its snapshot after those locks were
   * granted, so the caps count committed claims only. Within a project the candidates are ranked
   * by id and one is taken only while the live RUNNING runs plus its rank stay within the cap, so
   * the cap holds for the batch as a whole. Each run keeps its own token, owner, lease and event.
   * Answers the rows claimed; a run missing from them was not. Each run at most once per batch.
   */
  async claimMany(reqs: ClaimRequest[]): Promise<ClaimedRow[]> {
    assertTransitions(RUNNABLE, RunStatus.RUNNING);
    // Arrays travel as text[] (the round trip inlines them as literals) and are cast here.
    const runIds = reqs.map((r) => r.runId);
    const lock = bindNamed(
      `SELECT p.id FROM projects p
        WHERE p.id IN (SELECT r.project_id FROM runs r WHERE r.id = ANY(:runIds::text[]::uuid[]))
        ORDER BY p.id FOR NO KEY UPDATE OF p`,
      { runIds },
    );
    // A candidate is never a live RUNNING run itself, so `live` counts only the others.
    const claim = bindNamed(
      `WITH input AS (
        SELECT * FROM unnest(:runIds::text[]::uuid[], :redisTokens::text[]::bigint[], :owners::text[],
                             :leaseMs::text[]::int[], :workerIds::text[])
          AS i(run_id, redis_token, owner, lease_ms, worker_id)
      ), cand AS (
        SELECT r.id, r.project_id, row_number() OVER (PARTITION BY r.project_id ORDER BY r.id) AS rank
          FROM (SELECT i.run_id, :fromStatuses::text[] AS from_statuses FROM input i OFFSET 0) i
          CROSS JOIN LATERAL (
            SELECT r.id, r.project_id FROM runs r
             WHERE r.id = i.run_id AND r.status = ANY(i.from_statuses) AND ${CLAIMABLE} LIMIT 1
          ) r
      ), load AS (
        SELECT p.id AS project_id, p.max_concurrent_runs AS cap,
               (SELECT count(*) FROM runs o WHERE o.project_id = p.id AND o.status = 'RUNNING'
                   AND o.lease_expires_at > now()) AS live
          FROM projects p WHERE p.id IN (SELECT project_id FROM cand)
      ), prev AS (
        SELECT r.id, r.status, i.redis_token, i.owner, i.lease_ms
          FROM (SELECT i.*, :fromStatuses::text[] AS from_statuses
                  FROM input i JOIN cand c ON c.id = i.run_id JOIN load l ON l.project_id = c.project_id
                 WHERE l.live + c.rank <= l.cap ORDER BY i.run_id OFFSET 0) i
          CROSS JOIN LATERAL (
            SELECT r.id, r.status FROM runs r
             WHERE r.id = i.run_id AND r.status = ANY(i.from_statuses) AND ${CLAIMABLE}
               FOR UPDATE OF r LIMIT 1
          ) r
      ), upd AS (
        UPDATE runs r SET status = 'RUNNING', updated_at = now(), attempts = r.attempts + 1,
               fencing_token = GREATEST(r.fencing_token + 1, prev.redis_token), lease_owner = prev.owner,
               lease_expires_at = now() + prev.lease_ms * interval '1 millisecond',
               started_at = COALESCE(r.started_at, now())
          -- The status read under the row lock, column to column (a constant list here had the
          -- planner scan the status index): the row's own conditions were checked under that lock.
          FROM prev WHERE r.id = prev.id AND r.status = prev.status
        RETURNING ${prefixed('r', CLAIMED_COLUMNS)}, prev.status AS from_status
      ), ev AS (
        INSERT INTO run_events (run_id, from_status, to_status, attempt, fencing_token, worker_id, reason)
        SELECT upd.id, upd.from_status, upd.status, upd.attempts, upd.fencing_token, i.worker_id, 'claimed'
          FROM upd JOIN input i ON i.run_id = upd.id
      )
      SELECT ${prefixed('upd', CLAIMED_COLUMNS)}, upd.from_status,
             p.name AS project_name, p.workspace_path AS project_workspace_path
        FROM upd JOIN projects p ON p.id = upd.project_id`,
      {
        runIds,
        redisTokens: reqs.map((r) => String(r.redisToken)),
        owners: reqs.map((r) => r.owner),
        leaseMs: reqs.map((r) => String(r.leaseMs)),
        workerIds: reqs.map((r) => r.workerId),
        fromStatuses: RUNNABLE,
      },
    );
    const rows = await this.statements.inOneRoundTrip<ClaimedRow>([lock, claim]);
    for (const row of rows) this.transitions.counted({ to: RunStatus.RUNNING, from: RUNNABLE }, row);
    return rows;
  }
}
