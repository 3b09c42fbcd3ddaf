import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { db } from './app';

export interface WorkItemState {
  tasks: Array<{ id: string; project_id: string; status: string; title: string }>;
  runs: Array<{ id: string; status: string; kind: string }>;
  /** Task workspace directories under the item's project(s). */
  workspaces: string[];
}

/** Everything the intake created for one Plane work item, read from Postgres and the disk. */
export async function workItemState(workItemId: string, workspaceRoot: string): Promise<WorkItemState> {
  const { rows: tasks } = await db().query(
    `SELECT id, project_id, status, title FROM tasks WHERE external_provider = 'plane' AND external_id = $1`,
    [workItemId],
  );
  const { rows: runs } = await db().query(`SELECT id, status, kind FROM runs WHERE task_id = ANY($1)`, [
    tasks.map((t) => t.id),
  ]);
  const projects = [...new Set(tasks.map((t) => t.project_id as string))];
  const workspaces = projects.flatMap((p) => {
    const dir = join(workspaceRoot, p, 'tasks');
    return existsSync(dir) ? readdirSync(dir).map((d) => join(dir, d)) : [];
  });
  return { tasks, runs, workspaces };
}

export async function projectRuns(projectId: string): Promise<number> {
  const { rows } = await db().query('SELECT count(*)::int AS n FROM runs WHERE project_id = $1', [projectId]);
  return rows[0].n;
}
