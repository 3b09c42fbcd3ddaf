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
 * The insert of a project seen for the first time, yielding to `ux_projects_external_ref`; $1–$6
 * are `externalProjectParams`. Skipped outright when the project is already visible (the usual
 * case), so a known project costs an index probe, not a speculative insert.
 */
export const EXTERNAL_PROJECT_INSERT = `INSERT INTO projects (id, name, workspace_path, max_concurrent_runs, external_provider, external_id)
     SELECT $1::uuid,
            CASE WHEN EXISTS (SELECT 1 FROM projects WHERE name = $2::text) THEN $2::text || ' (' || $1::text || ')' ELSE $2::text END,
            $3, $4, $5, $6
      WHERE NOT EXISTS (SELECT 1 FROM projects WHERE external_provider = $5 AND external_id = $6)
     ON CONFLICT (external_provider, external_id) WHERE external_provider IS NOT NULL AND external_id IS NOT NULL DO NOTHING
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
export async function ensureExternalProject(em: EntityManager, workspaceRoot: string, ref: ExternalProjectRef): Promise<{ id: string }> {
  const inserted: Array<{ id: string }> = await em.query(EXTERNAL_PROJECT_INSERT, externalProjectParams(workspaceRoot, ref));
  if (inserted[0]) return inserted[0];
  // A new statement: under READ COMMITTED it sees the row whose commit the insert waited for.
  const existing: Array<{ id: string }> = await em.query('SELECT id FROM projects WHERE external_provider = $1 AND external_id = $2', [
    ref.provider,
    ref.externalId,
  ]);
  if (!existing[0]) throw new Error(`project ${ref.provider}:${ref.externalId} neither inserted nor found`);
  return existing[0];
}
