import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { auth, closeDb, count, db, startApp, TestApp, waitForStatus } from './support/app';
import { tempDir, testEnv } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, shuffle, v1Body, WorkItem } from './support/plane';
import { projectRuns, workItemState } from './support/plane-db';
import { SettledDeliveries } from '../src/webhooks/settled-deliveries';

/** Retries answered from a process's memory reach their row's count at its next fold: now. */
const foldCounts = (...apps: TestApp[]) => Promise.all(apps.map((a) => a.app.get(SettledDeliveries).fold()));

/** One `created` and five per-field `updated` deliveries, as Plane sends them after a rename. */
function createdAndUpdates(item: WorkItem): { created: string; updates: string[] } {
  const renamed = { ...item, name: `${item.name} (renamed)` };
  return {
    created: v1Body(item, 'created'),
    updates: ['name', 'state_id', 'priority', 'labels', 'assignees'].map((field, i) =>
      v1Body(renamed, 'updated', { field, updatedAt: `2026-11-02T09:0${i + 1}:00.000000Z` }),
    ),
  };
}

describe('Plane intake idempotency', () => {
  const countFile = join(tempDir('wh-idem'), 'executions.log');
  let env: Record<string, string>;
  let t: TestApp;

  beforeAll(async () => {
    env = testEnv('wh-idem', countFile, {
      PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      PLANE_PROJECT_MAX_CONCURRENT_RUNS: '4',
    });
    t = await startApp(env);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  /** The item ended with one task, one authoring run, one workspace and (once run) one execution. */
  async function expectExactlyOnce(item: WorkItem): Promise<{ taskId: string; runId: string }> {
    const state = await workItemState(item.id, t.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toHaveLength(1);
    expect(state.runs[0].kind).toBe('authoring');
    expect(await projectRuns(state.tasks[0].project_id)).toBe(1);
    await waitForStatus([state.runs[0].id], ['SUCCESS'], 30_000);
    // Made by the worker for the run's attempt, at the one task's path: never a second one.
    expect((await workItemState(item.id, t.config.runs.workspaceRoot)).workspaces).toEqual([
      join(t.config.runs.workspaceRoot, state.tasks[0].project_id, 'tasks', state.tasks[0].id),
    ]);
    expect(count(countFile, 'start', state.runs[0].id)).toBe(1);
    expect(count(countFile, 'done', state.runs[0].id)).toBe(1);
    return { taskId: state.tasks[0].id, runId: state.runs[0].id };
  }

  it('20 concurrent retries of one created body: 1 task, 1 run, 1 workspace, 1 execution, 19 duplicates', async () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    const answers = await Promise.all(Array.from({ length: 20 }, () => deliver(t, body)));

    const accepted = answers.filter((a) => a.status === 202);
    const duplicates = answers.filter((a) => a.status === 200);
    expect(accepted.map((a) => a.body.status)).toEqual(['accepted']);
    expect(duplicates).toHaveLength(19);
    for (const d of duplicates)
      expect(d.body).toEqual({ status: 'duplicate', deliveryId: accepted[0].body.deliveryId });

    const { taskId, runId } = await expectExactlyOnce(item);
    await foldCounts(t);
    const { rows } = await db().query('SELECT * FROM webhook_deliveries WHERE work_item_id = $1', [item.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      status: 'processed',
      reason: 'task_created',
      task_id: taskId,
      run_id: runId,
      duplicate_count: 19,
      process_attempts: 1,
      dedupe_key: `sha256:${createHash('sha256').update(body).digest('hex')}`,
    });
    const metrics = await t.http.get('/metrics');
    const dedupe = /onceflow_duplicates_suppressed_total\{guard="delivery_dedupe"\} (\d+)/.exec(metrics.text);
    expect(Number(dedupe?.[1])).toBeGreaterThanOrEqual(19);

    const task = await t.http.get(`/api/tasks/${taskId}`).set(auth);
    expect(task.status).toBe(200);
    expect(task.body).toMatchObject({
      id: taskId,
      externalProvider: 'plane',
      externalId: item.id,
      runId,
      status: 'open',
      title: item.name,
    });
    expect(task.body.metadata).toMatchObject({ workspaceId: item.workspace, projectId: item.project });
  });

  it.each([
    ['created first, then five updates concurrently', 'first'],
    ['created and five updates all concurrently, shuffled', 'mixed'],
    ['five updates only (the created was missed)', 'none'],
  ])('%s: 1 task, 1 run', async (_name, variant) => {
    const item = newWorkItem();
    const { created, updates } = createdAndUpdates(item);
    const answers = [];
    if (variant === 'first') answers.push(await deliver(t, created));
    const batch = variant === 'mixed' ? shuffle([created, ...updates]) : shuffle(updates);
    answers.push(...(await Promise.all(batch.map((b) => deliver(t, b)))));

    expect(answers.filter((a) => a.status === 202).map((a) => a.body.status)).toEqual(['accepted']);
    const rest = answers.filter((a) => a.status !== 202);
    expect(
      rest.every((a) => a.status === 200 && a.body.status === 'duplicate' && a.body.reason === 'task_exists'),
    ).toBe(true);
    expect(new Set(answers.map((a) => a.body.deliveryId)).size).toBe(answers.length);
    await expectExactlyOnce(item);
    // Out-of-order data never wins: the title follows the newest updated_at whatever the order.
    const { rows } = await db().query(`SELECT title, metadata FROM tasks WHERE external_id = $1`, [item.id]);
    expect(rows[0].title).toBe(`${item.name} (renamed)`);
    expect(rows[0].metadata.updatedAt).toBe('2026-11-02T09:05:00.000000Z');
  });

  it('two app instances on one database, hit concurrently: still 1 task, 1 run, 1 execution', async () => {
    const t2 = await startApp(env);
    try {
      const item = newWorkItem();
      const { created, updates } = createdAndUpdates(item);
      const bodies = shuffle([...Array.from({ length: 10 }, () => created), ...updates, ...updates]);
      const answers = await Promise.all(bodies.map((b, i) => deliver(i % 2 ? t2 : t, b)));
      expect(answers.every((a) => a.status === 200 || a.status === 202)).toBe(true);
      expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
      await expectExactlyOnce(item);
      await foldCounts(t, t2);
      const { rows } = await db().query(
        'SELECT count(*)::int AS n, sum(duplicate_count)::int AS dups FROM webhook_deliveries WHERE work_item_id = $1',
        [item.id],
      );
      expect(rows[0]).toEqual({ n: 6, dups: 14 });
    } finally {
      await t2.close();
    }
  });

  it('replaying a processed delivery creates nothing new', async () => {
    const item = newWorkItem();
    const first = await deliver(t, v1Body(item, 'created'));
    expect(first.status).toBe(202);
    const { runId } = await expectExactlyOnce(item);

    const replays = await Promise.all(
      [1, 2, 3].map(() => t.http.post(`/api/webhook-deliveries/${first.body.deliveryId}/replay`).set(auth)),
    );
    for (const r of replays) {
      expect(r.status).toBe(202);
      expect(r.body).toMatchObject({
        deliveryId: first.body.deliveryId,
        status: 'duplicate',
        reason: 'task_exists',
        runId,
      });
    }
    await expectExactlyOnce(item);
    const { rows } = await db().query('SELECT status, reason, process_attempts FROM webhook_deliveries WHERE id = $1', [
      first.body.deliveryId,
    ]);
    expect(rows[0]).toEqual({ status: 'processed', reason: 'task_created', process_attempts: 4 });
  });

  it('a retry takes over a delivery whose processing died (still accepted after a minute), never a fresh one', async () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    const key = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    // As a process killed between the insert and the task transaction leaves it.
    const { rows } = await db().query(
      `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, action, work_item_id, payload)
       VALUES ('plane', $1, 'v1', 'issue', 'created', $2, $3) RETURNING id`,
      [key, item.id, JSON.parse(body)],
    );
    const fresh = await deliver(t, body);
    expect(fresh.status).toBe(200);
    expect(fresh.body).toEqual({ status: 'duplicate', deliveryId: rows[0].id });
    expect((await workItemState(item.id, t.config.runs.workspaceRoot)).tasks).toHaveLength(0);

    await db().query(`UPDATE webhook_deliveries SET updated_at = now() - interval '10 minutes' WHERE id = $1`, [
      rows[0].id,
    ]);
    const retries = await Promise.all([1, 2, 3].map(() => deliver(t, body)));
    for (const r of retries) expect(r.body).toEqual({ status: 'duplicate', deliveryId: rows[0].id });
    await expectExactlyOnce(item);
    await foldCounts(t);
    const { rows: after } = await db().query(
      'SELECT status, duplicate_count, process_attempts FROM webhook_deliveries WHERE id = $1',
      [rows[0].id],
    );
    expect(after[0]).toEqual({ status: 'processed', duplicate_count: 4, process_attempts: 1 });
  });
});
