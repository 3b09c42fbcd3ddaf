import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { auth, closeDb, db, runStatus, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, v1Body, v2Body } from './support/plane';
import { workItemState } from './support/plane-db';

/** API role only: no worker takes the runs, so "not started yet" stays true until we say otherwise. */
describe('Plane work-item lifecycle', () => {
  const countFile = join(tempDir('wh-life'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(testEnv('wh-life', countFile, { APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  async function created(): Promise<{ item: ReturnType<typeof newWorkItem>; taskId: string; runId: string }> {
    const item = newWorkItem();
    const res = await deliver(t, v1Body(item, 'created'));
    expect(res.status).toBe(202);
    const state = await workItemState(item.id, t.config.runs.workspaceRoot);
    expect(state.runs).toHaveLength(1);
    expect(state.runs[0].status).toBe('QUEUED');
    return { item, taskId: state.tasks[0].id, runId: state.runs[0].id };
  }

  it('a delete cancels the unstarted run and marks the task cancelled; later events create nothing', async () => {
    const { item, taskId, runId } = await created();
    const del = await deliver(t, v1Body(item, 'deleted'));
    expect(del.status).toBe(202);
    expect(del.body).toMatchObject({ status: 'accepted' });
    expect(await runStatus(runId)).toBe('CANCELLED');

    const task = await t.http.get('/api/tasks').query({ provider: 'plane', externalId: item.id }).set(auth);
    expect(task.status).toBe(200);
    expect(task.body.items).toEqual([
      expect.objectContaining({ id: taskId, status: 'cancelled', runId, runStatus: 'CANCELLED', externalId: item.id }),
    ]);
    const { rows } = await db().query('SELECT status, reason FROM webhook_deliveries WHERE id = $1', [
      del.body.deliveryId,
    ]);
    expect(rows[0]).toEqual({ status: 'processed', reason: 'task_cancelled_run_cancelled' });

    const late = await deliver(t, v1Body(item, 'updated', { field: 'name', updatedAt: '2026-11-03T00:00:00Z' }));
    expect(late.body).toMatchObject({ status: 'duplicate', reason: 'task_exists' });
    const state = await workItemState(item.id, t.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toEqual([expect.objectContaining({ id: runId, status: 'CANCELLED' })]);
  });

  it('a v2 archive does the same', async () => {
    const { item, runId } = await created();
    const res = await deliver(t, v2Body(item, 'workitem.archived'));
    expect(res.status).toBe(202);
    expect(await runStatus(runId)).toBe('CANCELLED');
    expect((await workItemState(item.id, t.config.runs.workspaceRoot)).tasks[0].status).toBe('cancelled');
  });

  it('a delete leaves a run that already started alone, but still cancels the task', async () => {
    const { item, runId } = await created();
    // As a worker's claim leaves it (no worker runs in this app).
    await db().query(`UPDATE runs SET status = 'RUNNING', attempts = 1, started_at = now() WHERE id = $1`, [runId]);
    const res = await deliver(t, v1Body(item, 'deleted'));
    expect(res.status).toBe(202);
    expect(await runStatus(runId)).toBe('RUNNING');
    expect((await workItemState(item.id, t.config.runs.workspaceRoot)).tasks[0].status).toBe('cancelled');
    const { rows } = await db().query('SELECT reason FROM webhook_deliveries WHERE id = $1', [res.body.deliveryId]);
    expect(rows[0].reason).toBe('task_cancelled');
  });

  it('v2: event_id dedupes retries whose delivery_id differs; a new event for a known item is a business-key duplicate', async () => {
    const item = newWorkItem();
    const first = await deliver(t, v2Body(item, 'workitem.created', { eventId: 'evt-a' + item.id }));
    const retry = await deliver(t, v2Body(item, 'workitem.created', { eventId: 'evt-a' + item.id }));
    const update = await deliver(t, v2Body(item, 'workitem.updated', { eventId: 'evt-b' + item.id }));
    expect([first.status, retry.status, update.status]).toEqual([202, 200, 200]);
    expect(retry.body).toEqual({ status: 'duplicate', deliveryId: first.body.deliveryId });
    expect(update.body).toMatchObject({ status: 'duplicate', reason: 'task_exists' });
    const state = await workItemState(item.id, t.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toHaveLength(1);
  });

  it('a processing failure is recorded and answered 202 (never a 5xx); a replay then creates the task once', async () => {
    const notADir = join(tempDir('wh-broken'), 'file');
    writeFileSync(notADir, 'workspaces cannot be made under a file');
    const broken = await startApp(
      testEnv('wh-broken', countFile, {
        APP_ROLE: 'api',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
        WORKSPACE_ROOT: notADir,
      }),
    );
    const item = newWorkItem();
    let deliveryId: string;
    try {
      const res = await deliver(broken, v1Body(item, 'created'));
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ status: 'accepted' });
      deliveryId = res.body.deliveryId;
    } finally {
      await broken.close();
    }
    // The task transaction rolled back whole (the first-seen project's `tasks` directory could not
    // be made under a file): no project, task or run.
    const { rows: projects } = await db().query(`SELECT count(*)::int AS n FROM projects WHERE external_id = $1`, [
      item.project,
    ]);
    expect(projects[0].n).toBe(0);
    expect((await workItemState(item.id, t.config.runs.workspaceRoot)).tasks).toHaveLength(0);
    const failed = await t.http.get('/api/webhook-deliveries').query({ provider: 'plane', status: 'failed' }).set(auth);
    expect(failed.body.items).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          id: deliveryId,
          reason: 'processing_failed',
          error: expect.stringMatching(/ENOTDIR|not a directory/),
        }),
      ]),
    );

    const replay = await t.http.post(`/api/webhook-deliveries/${deliveryId}/replay`).set(auth);
    expect(replay.status).toBe(202);
    expect(replay.body).toMatchObject({ deliveryId, status: 'processed', reason: 'task_created' });
    const again = await t.http.post(`/api/webhook-deliveries/${deliveryId}/replay`).set(auth);
    expect(again.body).toMatchObject({ status: 'duplicate', reason: 'task_exists', taskId: replay.body.taskId });
    const state = await workItemState(item.id, t.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toHaveLength(1);
    // The task's workspace is its first attempt's to make (no worker here): none yet.
    expect(state.workspaces).toHaveLength(0);
    const { rows } = await db().query('SELECT status, error, process_attempts FROM webhook_deliveries WHERE id = $1', [
      deliveryId,
    ]);
    expect(rows[0]).toEqual({ status: 'processed', error: null, process_attempts: 3 });
  });

  it('GET /api/tasks/:id answers 404 for an unknown task and 400 for a malformed id', async () => {
    expect((await t.http.get('/api/tasks/00000000-0000-4000-8000-000000000000').set(auth)).status).toBe(404);
    expect((await t.http.get('/api/tasks/nope').set(auth)).status).toBe(400);
  });
});
