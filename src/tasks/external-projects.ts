import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { EntityManager } from 'typeorm';

export interface ExternalProjectRef {
  provider: string;
  externalId: string;
  /** Display name on first sight; a clash with an unrelated project's name gets the id appended. */
  name: string;
  maxConcurrentRuns: number;
}

/**
 * The insert of a project seen for the first time; $1–$6 are `externalProjectParams`. Skipped
 * outright when the project is already visible (the usual case), so a known project costs an
 * index probe, not a speculative insert. `ON CONFLICT DO NOTHING` without a target: EVERY unique
 * index is an arbiter, `uq_projects_name` too. With only `ux_projects_external_ref` as arbiter, a
 * concurrent creator whose name entry went in before its external-ref entry (or an unrelated
 * project of the same name committed meanwhile) made the insert fail with 23505 on the name: a
 * failed delivery (seen under load in `webhooks-idempotency`). A name clash now inserts nothing;
 * ensureExternalProject then tries again, and the CASE gives the new project a distinct name.
 */
export const EXTERNAL_PROJECT_INSERT = `INSERT INTO projects (id, name, workspace_path, max_concurrent_runs, external_provider, external_id)
     SELECT $1::uuid,
            CASE WHEN EXISTS (SELECT 1 FROM projects WHERE name = $2::text) THEN $2::text || ' (' || $1::text || ')' ELSE $2::text END,
            $3, $4, $5, $6
      WHERE NOT EXISTS (SELECT 1 FROM projects WHERE external_provider = $5 AND external_id = $6)
     ON CONFLICT DO NOTHING
     RETURNING id`;

export function externalProjectParams(workspaceRoot: string, ref: ExternalProjectRef): unknown[] {
  const id = randomUUID();
  return [id, ref.name, join(workspaceRoot, id), ref.maxConcurrentRuns, ref.provider, ref.externalId];
}

/**
 * The onceflow project for an external project, created on first sight. Idempotent across
 * replicas: the insert yields to `ux_projects_external_ref` (a concurrent creator's row wins, we
 * wait for its commit and then read it). Runs in the caller's transaction.
 */
export async function ensureExternalProject(
  em: EntityManager,
  workspaceRoot: string,
  ref: ExternalProjectRef,
): Promise<{ id: string }> {
  // Twice at most: the second insert sees the committed name that made the first one yield.
  for (let attempt = 1; ; attempt++) {
    const inserted: Array<{ id: string }> = await em.query(
      EXTERNAL_PROJECT_INSERT,
      externalProjectParams(workspaceRoot, ref),
    );
    if (inserted[0]) return inserted[0];
    // A new statement: under READ COMMITTED it sees the row whose commit the insert waited for.
    const existing: Array<{ id: string }> = await em.query(
      'SELECT id FROM projects WHERE external_provider = $1 AND external_id = $2',
      [ref.provider, ref.externalId],
    );
    if (existing[0]) return existing[0];
    if (attempt === 2) throw new Error(`project ${ref.provider}:${ref.externalId} neither inserted nor found`);
  }
}
