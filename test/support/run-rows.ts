import { randomUUID } from 'node:crypto';
import { db } from './app';

/**
 * Row factories for tests that call the runs services directly: each test makes its own project
 * and runs, in exactly the state it needs (a status, a lease, a token), without driving a worker.
 */
export async function insertProject(
  maxConcurrentRuns = 1,
): Promise<{ id: string; name: string; workspace_path: string }> {
  const name = `p-${randomUUID()}`;
  const { rows } = await db().query(
    `INSERT INTO projects (name, workspace_path, max_concurrent_runs) VALUES ($1, $2, $3) RETURNING id, name, workspace_path`,
    [name, `/tmp/onceflow-test/${name}`, maxConcurrentRuns],
  );
  return rows[0];
}

export interface RunState {
  status?: string;
  attempts?: number;
  fencing_token?: number;
  lease_owner?: string | null;
  /** Lease end relative to now, in ms (negative: already expired); null: no lease. */
  leaseMs?: number | null;
  started_at?: Date | null;
  last_error?: string | null;
  finished_at?: Date | null;
  requirement?: string;
}

export async function insertRun(projectId: string, state: RunState = {}): Promise<string> {
  const { rows } = await db().query(
    `INSERT INTO runs (project_id, requirement, status, attempts, fencing_token, lease_owner, lease_expires_at, started_at, last_error, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::int IS NULL THEN NULL ELSE now() + $7::int * interval '1 millisecond' END, $8, $9, $10)
     RETURNING id`,
    [
      projectId,
      state.requirement ?? 'a test run',
      state.status ?? 'PENDING',
      state.attempts ?? 0,
      state.fencing_token ?? 0,
      state.lease_owner ?? null,
      state.leaseMs ?? null,
      state.started_at ?? null,
      state.last_error ?? null,
      state.finished_at ?? null,
    ],
  );
  return rows[0].id;
}

export async function runRow(id: string): Promise<Record<string, any>> {
  const { rows } = await db().query(
    `SELECT *, EXTRACT(EPOCH FROM (lease_expires_at - now())) * 1000 AS lease_ms FROM runs WHERE id = $1`,
    [id],
  );
  return rows[0];
}

export async function runEvents(id: string): Promise<Array<Record<string, any>>> {
  const { rows } = await db().query('SELECT * FROM run_events WHERE run_id = $1 ORDER BY id', [id]);
  return rows;
}
