import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { pgConstraint, pgErrorCode } from '../src/database/pg-errors';
import { pgPool } from '../src/database/pg-statements';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { UQ_PROJECTS_NAME } from '../src/runs/entities/project.entity';
import { ExternalWorkItem, TaskIntakeService } from '../src/tasks/task-intake.service';
import { WebhookDeliveriesRepository } from '../src/webhooks/webhook-deliveries.repository';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';

/** TaskIntakeService called directly (API role: runs stay QUEUED, their jobs stay in the queue). */
describe('TaskIntakeService', () => {
  const countFile = join(tempDir('intake'), 'executions.log');
  let t: TestApp;
  let intake: TaskIntakeService;
  let deliveries: WebhookDeliveriesRepository;

  beforeAll(async () => {
    t = await startApp(testEnv('intake', countFile, { APP_ROLE: 'api' }));
    intake = t.app.get(TaskIntakeService);
    deliveries = t.app.get(WebhookDeliveriesRepository);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const item = (over: Partial<ExternalWorkItem> = {}): ExternalWorkItem => ({
    provider: 'plane',
    externalId: randomUUID(),
    project: { externalId: randomUUID(), name: 'Intake test', maxConcurrentRuns: 2 },
    title: 'First title',
    url: 'https://plane.example/i/1',
    metadata: { updatedAt: '2026-11-02T09:00:00Z', n: 1 },
    requirement: 'First title\n\nDo it',
    ...over,
  });
  /** One project for every "known project" case: the suite's project count stays small (api.e2e lists them all). */
  const known = { externalId: randomUUID(), name: `Known ${randomUUID()}`, maxConcurrentRuns: 2 };
  /** An item, of the known project (seen before the call returns) or of a project never seen. */
  const itemOf = async (knownProject: boolean): Promise<ExternalWorkItem> => {
    if (!knownProject) return item();
    await intake.open(item({ project: known }));
    return item({ project: known });
  };
  const task = async (id: string) => (await db().query('SELECT * FROM tasks WHERE id = $1', [id])).rows[0];
  const run = async (id: string) => (await db().query('SELECT * FROM runs WHERE id = $1', [id])).rows[0];
  const taskDirs = (projectId: string) => {
    const dir = join(t.config.runs.workspaceRoot, projectId, 'tasks');
    return existsSync(dir) ? readdirSync(dir) : [];
  };
  const allTaskDirs = () =>
    existsSync(t.config.runs.workspaceRoot) ? readdirSync(t.config.runs.workspaceRoot).flatMap(taskDirs).sort() : [];

  /** The caller's extra work of the tests: a delivery row, marked by the statement that creates the task. */
  const delivery = async () =>
    (
      await db().query(
        `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, payload)
         VALUES ('plane', $1, 'v1', 'issue', '{}') RETURNING id`,
        [randomUUID()],
      )
    ).rows[0].id as string;
  const marking = (deliveryId: string) => (run: string) => deliveries.processedCte(deliveryId, 'task_created', run);
  /** Extra work that fails: a copy of the task's project under the same name (uq_projects_name). */
  const projectCopy = (run: string) => ({
    text: `project_copy AS (
        INSERT INTO projects (id, name, workspace_path)
        SELECT gen_random_uuid(), p.name, p.workspace_path || '-copy' FROM projects p JOIN ${run} ON p.id = ${run}.project_id
      )`,
    values: {},
  });
  const count = async (sql: string, param: string) => (await db().query(sql, [param])).rows[0].n as number;
  const queue = () => t.app.get<Queue>(getQueueToken(RUNS_QUEUE));

  it.each([
    ['a project seen for the first time', false],
    ['a known project', true],
  ])(
    '%s: creates the task and its QUEUED authoring run (no workspace: its first attempt makes it), marks the caller’s row with them, and enqueues the run',
    async (_, knownProject) => {
      const it1 = await itemOf(knownProject);
      const before = allTaskDirs();
      const deliveryId = await delivery();
      const result = await intake.open(it1, marking(deliveryId));
      expect(result).toMatchObject({ kind: 'created', taskId: expect.any(String), runId: expect.any(String) });
      const created = result as { taskId: string; runId: string; projectId: string };
      const marked = await db().query('SELECT status, reason, task_id, run_id FROM webhook_deliveries WHERE id = $1', [
        deliveryId,
      ]);
      expect(marked.rows[0]).toEqual({
        status: 'processed',
        reason: 'task_created',
        task_id: created.taskId,
        run_id: created.runId,
      });
      expect(await task(created.taskId)).toMatchObject({
        project_id: created.projectId,
        external_provider: 'plane',
        external_id: it1.externalId,
        title: 'First title',
        url: it1.url,
        status: 'open',
        metadata: it1.metadata,
      });
      expect(await run(created.runId)).toMatchObject({
        task_id: created.taskId,
        kind: 'authoring',
        status: 'QUEUED',
        dispatch_generation: 1,
        requirement: it1.requirement,
        project_id: created.projectId,
      });
      const events = await db().query(
        'SELECT from_status, to_status, attempt, fencing_token, reason FROM run_events WHERE run_id = $1',
        [created.runId],
      );
      expect(events.rows).toEqual([
        { from_status: null, to_status: 'QUEUED', attempt: 0, fencing_token: '0', reason: 'created and dispatched' },
      ]);
      // No file system on the intake's path: the task's workspace is made by the worker that runs it
      // (webhooks-idempotency). A project seen for the first time gets its empty `tasks` directory.
      expect(allTaskDirs()).toEqual(before);
      expect(readdirSync(join(t.config.runs.workspaceRoot, created.projectId, 'tasks'))).toEqual([]);
      // The answer does not wait for the job (next test): it follows.
      const jobsOf = async (runId: string) =>
        (await queue().getJobs(['waiting', 'delayed'])).filter((j) => j.data.runId === runId);
      await waitFor(async () => (await jobsOf(created.runId)).length > 0, 10_000, 'the run’s job');
      expect(await jobsOf(created.runId)).toHaveLength(1);
    },
  );

  it('answers with the committed QUEUED run without waiting for its job, which follows once Redis takes writes again', async () => {
    const it1 = await itemOf(true);
    const admin = new Redis(t.config.redis.url);
    try {
      // Every write to Redis waits (the producer guard, Bull's add); Postgres and the disk do not.
      await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
      const t0 = Date.now();
      const result = await intake.open(it1);
      const answeredMs = Date.now() - t0;
      expect(result).toMatchObject({ kind: 'created' });
      const { runId } = result as { runId: string };
      expect(await run(runId)).toMatchObject({ status: 'QUEUED' });
      // Waiting for the enqueue would have taken the rest of the pause.
      expect(answeredMs).toBeLessThan(1000);
      await admin.call('CLIENT', 'UNPAUSE');
      await waitFor(
        async () => (await queue().getJobs(['waiting', 'delayed'])).some((j) => j.data.runId === runId),
        10_000,
        'the run’s job',
      );
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
      await admin.quit();
    }
  });

  it.each([
    ['a project seen for the first time', false],
    ['a known project', true],
  ])(
    '%s: the caller’s extra work fails (a non-business unique key, the project name): the caller’s error, nothing kept',
    async (_, knownProject) => {
      const it1 = await itemOf(knownProject);
      const before = allTaskDirs();
      const deliveryId = await delivery();
      const err = await intake
        .open(it1, (run) => {
          const mark = marking(deliveryId)(run);
          const copy = projectCopy(run);
          return { text: `${mark.text}, ${copy.text}`, values: mark.values };
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect([pgErrorCode(err), pgConstraint(err)]).toEqual(['23505', UQ_PROJECTS_NAME]);
      expect(await count('SELECT count(*)::int AS n FROM tasks WHERE external_id = $1', it1.externalId)).toBe(0);
      expect(
        await count('SELECT count(*)::int AS n FROM projects WHERE external_id = $1', it1.project.externalId),
      ).toBe(knownProject ? 1 : 0);
      expect(
        await count(
          `SELECT count(*)::int AS n FROM webhook_deliveries WHERE id = $1 AND status = 'accepted'`,
          deliveryId,
        ),
      ).toBe(1);
      expect(allTaskDirs()).toEqual(before);
    },
  );

  it('a known item is "exists"; only a newer updatedAt refreshes title, url and metadata', async () => {
    const first = item();
    const created = (await intake.open(first)) as { taskId: string; runId: string };
    const older = await intake.open({ ...first, title: 'Older', metadata: { updatedAt: '2026-11-01T00:00:00Z' } });
    expect(older).toEqual({ kind: 'exists', taskId: created.taskId, runId: created.runId });
    expect(await task(created.taskId)).toMatchObject({ title: 'First title' });
    await intake.open({ ...first, title: 'No date', metadata: { updatedAt: null } });
    expect(await task(created.taskId)).toMatchObject({ title: 'First title' });
    await intake.open({ ...first, title: 'Newer', url: null, metadata: { updatedAt: '2026-11-03T00:00:00Z', n: 2 } });
    expect(await task(created.taskId)).toMatchObject({
      title: 'Newer',
      url: first.url,
      metadata: { updatedAt: '2026-11-03T00:00:00Z', n: 2 },
    });
    await intake.open({
      ...first,
      title: 'Newer url',
      url: 'https://plane.example/i/2',
      metadata: { updatedAt: '2026-11-04T00:00:00Z' },
    });
    expect(await task(created.taskId)).toMatchObject({ title: 'Newer url', url: 'https://plane.example/i/2' });

    // A task stored without a date: an undated event still refreshes nothing, a dated one does.
    const undated = item({ metadata: { updatedAt: null } });
    const made = (await intake.open(undated)) as { taskId: string };
    await intake.open({ ...undated, title: 'Undated again' });
    expect(await task(made.taskId)).toMatchObject({ title: 'First title' });
    await intake.open({ ...undated, title: 'Dated', metadata: { updatedAt: '2026-11-03T00:00:00Z' } });
    expect(await task(made.taskId)).toMatchObject({ title: 'Dated' });
  });

  it('close(): cancels the task and its unstarted run; a cancelled task is never refreshed', async () => {
    const it1 = item();
    const created = (await intake.open(it1)) as { taskId: string; runId: string };
    const closed = await intake.close('plane', it1.externalId, 'work item deleted in Plane');
    expect(closed).toEqual({ kind: 'closed', taskId: created.taskId, runId: created.runId, runCancelled: true });
    expect(await task(created.taskId)).toMatchObject({ status: 'cancelled' });
    const r = await run(created.runId);
    expect(r).toMatchObject({ status: 'CANCELLED' });
    expect(r.finished_at).not.toBeNull();
    const { rows } = await db().query('SELECT reason FROM run_events WHERE run_id = $1 AND to_status = $2', [
      created.runId,
      'CANCELLED',
    ]);
    expect(rows).toEqual([{ reason: 'work item deleted in Plane' }]);
    expect(await intake.close('plane', it1.externalId, 'again')).toMatchObject({ kind: 'closed', runCancelled: false });
    await intake.open({ ...it1, title: 'After close', metadata: { updatedAt: '2027-01-01T00:00:00Z' } });
    expect(await task(created.taskId)).toMatchObject({ title: 'First title', status: 'cancelled' });
  });

  it('close(): a started run is left alone; an unknown item is not_found', async () => {
    const it1 = item();
    const created = (await intake.open(it1)) as { taskId: string; runId: string };
    await db().query(`UPDATE runs SET status = 'RUNNING', attempts = 1 WHERE id = $1`, [created.runId]);
    expect(await intake.close('plane', it1.externalId, 'deleted')).toMatchObject({
      kind: 'closed',
      runCancelled: false,
    });
    expect(await run(created.runId)).toMatchObject({ status: 'RUNNING' });
    expect(await intake.close('plane', randomUUID(), 'deleted')).toEqual({ kind: 'not_found' });
    expect(await intake.close('github', it1.externalId, 'deleted')).toEqual({ kind: 'not_found' });
  });

  it.each([
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ])(
    'ten concurrent opens of one item (probablyNew %s, known project %s): one created, nine exists, no directory made',
    async (probablyNew, knownProject) => {
      const it1 = await itemOf(knownProject);
      const before = allTaskDirs();
      const results = await Promise.all(Array.from({ length: 10 }, () => intake.open(it1, undefined, probablyNew)));
      const created = results.filter((r) => r.kind === 'created') as Array<{
        taskId: string;
        runId: string;
        projectId: string;
      }>;
      expect(created).toHaveLength(1);
      for (const r of results) expect(r).toMatchObject({ taskId: created[0].taskId, runId: created[0].runId });
      expect(allTaskDirs()).toEqual(before);
    },
  );

  it('probablyNew on a known item (no cheap read first): still "exists", refreshed, no second run or workspace', async () => {
    const it1 = item();
    const first = (await intake.open(it1)) as { taskId: string; runId: string; projectId: string };
    const again = await intake.open(
      { ...it1, title: 'Newer title', metadata: { updatedAt: '2026-11-02T10:00:00Z' } },
      undefined,
      true,
    );
    expect(again).toEqual({ kind: 'exists', taskId: first.taskId, runId: first.runId });
    expect(await task(first.taskId)).toMatchObject({ title: 'Newer title' });
    expect((await db().query('SELECT count(*)::int AS n FROM runs WHERE task_id = $1', [first.taskId])).rows[0].n).toBe(
      1,
    );
    expect(taskDirs(first.projectId)).toEqual([]);
  });

  it('eight items of a project seen for the first time, concurrently: one project, eight tasks and runs', async () => {
    // The project insert of all but one waits for the winner's commit, which its statement's
    // snapshot cannot see: they must read the project in a statement of their own.
    const project = { externalId: randomUUID(), name: `First sight ${randomUUID()}`, maxConcurrentRuns: 2 };
    const results = await Promise.all(Array.from({ length: 8 }, () => intake.open(item({ project }), undefined, true)));
    expect(results.map((r) => r.kind)).toEqual(Array(8).fill('created'));
    const { rows } = await db().query('SELECT id FROM projects WHERE external_provider = $1 AND external_id = $2', [
      'plane',
      project.externalId,
    ]);
    expect(rows).toHaveLength(1);
    const created = results as Array<{ taskId: string; runId: string; projectId: string }>;
    for (const r of created) expect(r.projectId).toBe(rows[0].id);
    expect(existsSync(join(t.config.runs.workspaceRoot, rows[0].id, 'tasks'))).toBe(true);
    expect(taskDirs(rows[0].id)).toEqual([]);
    expect(
      (await db().query('SELECT count(*)::int AS n FROM runs WHERE project_id = $1', [rows[0].id])).rows[0].n,
    ).toBe(8);
  });

  it('a project this process remembers whose row is gone: the item is created once, in the project as it is now', async () => {
    // Projects are never deleted by onceflow; a remembered id must still not strand an item if an operator does it.
    const project = { externalId: randomUUID(), name: `Remembered ${randomUUID()}`, maxConcurrentRuns: 1 };
    const first = (await intake.open(item({ project }), undefined, true)) as { kind: string; projectId: string };
    // The first item created the project; the second one read its id, which this process now remembers.
    expect(await intake.open(item({ project }), undefined, true)).toMatchObject({ projectId: first.projectId });
    await db().query('DELETE FROM projects WHERE id = $1', [first.projectId]);
    const it2 = item({ project });
    const results = await Promise.all(Array.from({ length: 8 }, () => intake.open(it2, undefined, true)));
    const created = results.filter((r) => r.kind === 'created') as Array<{ taskId: string; projectId: string }>;
    expect(created).toHaveLength(1);
    const { rows } = await db().query('SELECT id FROM projects WHERE external_provider = $1 AND external_id = $2', [
      'plane',
      project.externalId,
    ]);
    expect(rows.map((r) => r.id)).toEqual([created[0].projectId]);
    expect(created[0].projectId).not.toBe(first.projectId);
    expect(await count('SELECT count(*)::int AS n FROM tasks WHERE external_id = $1', it2.externalId)).toBe(1);
    // The project as it is now has the directory its task workspaces go in.
    expect(existsSync(join(t.config.runs.workspaceRoot, created[0].projectId, 'tasks'))).toBe(true);
  });

  it('a new project whose name an unrelated project takes meanwhile: created all the same, under a distinct name', async () => {
    // The intake's project insert waits on the other transaction's name entry; when that commits,
    // the insert must yield (every unique index is an arbiter), not fail with 23505 on the name.
    const name = `Clash ${randomUUID()}`;
    const holder = await db().connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`INSERT INTO projects (name, workspace_path) VALUES ($1, '/tmp/unrelated-project')`, [name]);
      const project = { externalId: randomUUID(), name, maxConcurrentRuns: 1 };
      const opening = intake.open(item({ project }), undefined, true);
      await waitFor(
        async () =>
          (
            await db().query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            )
          ).rows[0].n > 0,
        10_000,
        'the intake to wait for the name',
        10,
      );
      await holder.query('COMMIT');
      expect(await opening).toMatchObject({ kind: 'created' });
      const { rows } = await db().query('SELECT name FROM projects WHERE external_provider = $1 AND external_id = $2', [
        'plane',
        project.externalId,
      ]);
      expect(rows).toHaveLength(1);
      expect(rows[0].name.startsWith(`${name} (`)).toBe(true);
    } finally {
      holder.release();
    }
  });

  it('a known project whose prepared statements vanished (a pooler, a DEALLOCATE): created once all the same', async () => {
    // Last: after a 26000 this instance stops preparing.
    const it1 = await itemOf(true);
    const before = allTaskDirs();
    const pool = pgPool(t.app.get(DataSource));
    const clients = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
    for (const c of clients) await c.query('DEALLOCATE ALL');
    clients.forEach((c) => c.release());
    const results = await Promise.all(Array.from({ length: 4 }, () => intake.open(it1, undefined, true)));
    const created = results.filter((r) => r.kind === 'created') as Array<{ taskId: string; projectId: string }>;
    expect(created).toHaveLength(1);
    expect(
      await count(
        'SELECT count(*)::int AS n FROM runs WHERE task_id IN (SELECT id FROM tasks WHERE external_id = $1)',
        it1.externalId,
      ),
    ).toBe(1);
    expect(allTaskDirs()).toEqual(before);
  });
});
