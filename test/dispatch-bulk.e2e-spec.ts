import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { LockService } from '../src/locks/lock.service';
import { WORKER_ID } from '../src/locks/locks.module';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { MetricsService } from '../src/metrics/metrics.service';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { auth, closeDb, count, createProject, createRun, db, startApp, TestApp, waitForStatus } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';

type Item = { runId: string; status?: 'QUEUED'; jobId?: string; error?: { code: string; message: string } };

const bulk = (t: TestApp, body: unknown) =>
  t.http
    .post('/api/runs/dispatch')
    .set(auth)
    .send(body as object);

function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

async function queuedEvents(runIds: string[]): Promise<Map<string, number>> {
  const { rows } = await db().query(
    `SELECT run_id, count(*)::int AS n FROM run_events WHERE run_id = ANY($1) AND to_status = 'QUEUED' GROUP BY run_id`,
    [runIds],
  );
  return new Map(rows.map((r: { run_id: string; n: number }) => [r.run_id, r.n]));
}

/** POST /api/runs/dispatch with workers: executions counted by the command itself. */
describe('bulk dispatch storm', () => {
  const countFile = join(tempDir('bulk-storm'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(testEnv('bulk-storm', countFile, { WORKER_CONCURRENCY: '8' }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('10 concurrent bulk dispatches of 50 runs, single dispatches mixed in: each run queued and executed once', async () => {
    const project = await createProject(t.http, { maxConcurrentRuns: 50 });
    const runs = await Promise.all(Array.from({ length: 50 }, (_, i) => createRun(t.http, project.id, `bulk ${i}`)));
    const ids = runs.map((r) => r.id);
    const bulks = Array.from({ length: 10 }, () => bulk(t, { runIds: shuffled(ids) }));
    const singles = ids.map((id) => t.http.post(`/api/runs/${id}/dispatch`).set(auth));
    const [bulkAnswers, singleAnswers] = await Promise.all([Promise.all(bulks), Promise.all(singles)]);

    const queued: string[] = [];
    for (const a of bulkAnswers) {
      expect(a.status).toBe(200);
      expect(a.body.items).toHaveLength(50);
      for (const item of a.body.items as Item[]) {
        if (item.status === 'QUEUED') queued.push(item.runId);
        else expect(['DISPATCH_IN_PROGRESS', 'RUN_NOT_DISPATCHABLE']).toContain(item.error?.code);
      }
    }
    for (const a of singleAnswers) {
      expect([202, 409]).toContain(a.status);
      if (a.status === 202) queued.push(a.body.runId);
    }
    expect(queued.sort()).toEqual([...ids].sort());

    await waitForStatus(ids, ['SUCCESS'], 60_000);
    for (const id of ids) {
      expect(count(countFile, 'start', id)).toBe(1);
      expect(count(countFile, 'done', id)).toBe(1);
    }
    expect([...(await queuedEvents(ids)).values()]).toEqual(ids.map(() => 1));

    // Dispatched again once finished: every run refused with the single route's reason, none run again.
    const again = await bulk(t, { runIds: ids });
    expect(again.status).toBe(200);
    expect(new Set((again.body.items as Item[]).map((i) => i.error?.message))).toEqual(
      new Set(['run already succeeded']),
    );
    expect([...(await queuedEvents(ids)).values()]).toEqual(ids.map(() => 1));
    await waitForStatus(ids, ['SUCCESS']);
  });
});

/** In the API role: jobs are added but not taken, so each one can be read. */
describe('bulk dispatch answers', () => {
  let t: TestApp;
  let queue: Queue;
  let locks: LockService;
  let metrics: MetricsService;

  beforeAll(async () => {
    t = await startApp(testEnv('bulk', join(tempDir('bulk'), 'executions.log'), { APP_ROLE: 'api' }));
    queue = t.app.get(getQueueToken(RUNS_QUEUE));
    locks = t.app.get(LOCK_SERVICE);
    metrics = t.app.get(MetricsService);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const jobsOf = async (id: string) =>
    (await queue.getJobs(['waiting', 'delayed', 'active'])).filter((j) => j.data.runId === id).map((j) => j.id);
  const duplicates = async (guard: string) =>
    (await metrics.duplicatesSuppressed.get()).values.find((v) => v.labels.guard === guard)?.value ?? 0;
  const snapshot = async (ids: string[]) =>
    Promise.all(
      ids.map(async (id) => {
        // lease_ms is computed against now(); the lease itself (lease_expires_at) is compared.
        const { lease_ms: _leaseMs, ...row } = await runRow(id);
        return { row, events: await runEvents(id), jobs: await jobsOf(id) };
      }),
    );

  it('a mixed list: each item answered in order as its single dispatch would be, the others left as they were', async () => {
    const project = await insertProject();
    const pending = await insertRun(project.id);
    const busy = await insertRun(project.id);
    const running = await insertRun(project.id, { status: 'RUNNING', lease_owner: 'w', leaseMs: 60_000 });
    const succeeded = await insertRun(project.id, { status: 'SUCCESS', finished_at: new Date() });
    const failed = await insertRun(project.id, { status: 'FAILED' });
    const unknown = randomUUID();
    const untouched = [busy, running, succeeded, failed];
    const before = await snapshot(untouched);
    const owner = await locks.enterGuard(`dispatch:${busy}`, 5000);
    const [claimBefore, guardBefore] = [await duplicates('claim'), await duplicates('producer_guard')];

    const res = await bulk(t, { runIds: [running, unknown, pending, busy, succeeded, failed] });

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      items: [
        { runId: running, error: { code: 'RUN_NOT_DISPATCHABLE', message: 'run is already running' } },
        { runId: unknown, error: { code: 'RUN_NOT_FOUND', message: `run ${unknown} not found` } },
        { runId: pending, status: 'QUEUED', jobId: `run.${pending}.g1` },
        {
          runId: busy,
          error: { code: 'DISPATCH_IN_PROGRESS', message: 'a dispatch of this run is already in progress' },
        },
        { runId: succeeded, error: { code: 'RUN_NOT_DISPATCHABLE', message: 'run already succeeded' } },
        {
          runId: failed,
          error: { code: 'RUN_NOT_DISPATCHABLE', message: 'run failed; use POST /api/runs/:id/retry' },
        },
      ],
    });
    expect(await runRow(pending)).toMatchObject({ status: 'QUEUED', dispatch_generation: 1 });
    expect((await queue.getJob(`run.${pending}.g1`))?.data).toEqual({ runId: pending, generation: 1 });
    expect(await snapshot(untouched)).toEqual(before);
    expect(await runRow(unknown)).toBeUndefined();
    expect(await duplicates('claim')).toBe(claimBefore + 3);
    expect(await duplicates('producer_guard')).toBe(guardBefore + 1);

    // The guard another dispatch holds is still its own; the guards this call took are free again.
    expect(await locks.enterGuard(`dispatch:${busy}`, 5000)).toBeNull();
    await locks.leaveGuard(`dispatch:${busy}`, owner!);
    const takenAfter = await locks.enterGuard(`dispatch:${pending}`, 5000);
    expect(takenAfter).not.toBeNull();
    await locks.leaveGuard(`dispatch:${pending}`, takenAfter!);
  });

  it("writes the same run event as the single route's dispatch", async () => {
    const project = await insertProject();
    const [one, many] = [await insertRun(project.id), await insertRun(project.id)];
    expect((await t.http.post(`/api/runs/${one}/dispatch`).set(auth)).status).toBe(202);
    expect((await bulk(t, { runIds: [many] })).body.items[0].status).toBe('QUEUED');
    const shape = (e: Record<string, unknown>) => {
      const { id: _id, run_id: _run, at: _at, ...rest } = e;
      return rest;
    };
    const [single, bulked] = [await runEvents(one), await runEvents(many)];
    expect(bulked).toHaveLength(1);
    expect(bulked.map(shape)).toEqual(single.map(shape));
    expect(shape(bulked[0])).toMatchObject({
      from_status: 'PENDING',
      to_status: 'QUEUED',
      reason: 'dispatched',
      worker_id: t.app.get(WORKER_ID),
    });
  });

  it('a failed addBulk still answers QUEUED: the run is QUEUED in Postgres, for the reconciler to enqueue', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id);
    const addBulk = jest.spyOn(queue, 'addBulk').mockRejectedValueOnce(new Error('Redis is down'));
    try {
      const res = await bulk(t, { runIds: [id] });
      expect(res.body).toEqual({ items: [{ runId: id, status: 'QUEUED', jobId: `run.${id}.g1` }] });
      expect(addBulk).toHaveBeenCalledTimes(1);
    } finally {
      addBulk.mockRestore();
    }
    expect(await runRow(id)).toMatchObject({ status: 'QUEUED', dispatch_generation: 1 });
    expect(await jobsOf(id)).toEqual([]);
  });

  it.each([
    ['no body', undefined, 'runIds must be an array of run ids'],
    ['runIds not a list', { runIds: 'x' }, 'runIds must be an array of run ids'],
    ['an empty list', { runIds: [] }, 'runIds must list at least one run id'],
    ['101 ids', { runIds: 'many' }, 'runIds may list at most 100 run ids (got 101)'],
    ['an id that is not a UUID', { runIds: ['pending', 'not-a-uuid'] }, 'runIds[1] is not a UUID'],
    ['a number', { runIds: ['pending', 7] }, 'runIds[1] is not a UUID'],
    ['the same id twice', { runIds: ['pending', 'pending'] }, 'lists pending more than once'],
    ['the same id in another case', { runIds: ['pending', 'PENDING'] }, 'lists pending more than once'],
    ['an unknown field', { runIds: ['pending'], force: true }, 'property force should not exist'],
  ] as const)('%s → 400 with a clear message, nothing dispatched', async (_case, body, message) => {
    const project = await insertProject();
    const id = await insertRun(project.id);
    const fill = (v: unknown) => (v === 'pending' ? id : v === 'PENDING' ? id.toUpperCase() : v);
    const given = body as { runIds: unknown } | undefined;
    const ids = given?.runIds;
    const sent = given && {
      ...given,
      runIds:
        ids === 'many'
          ? [id, ...Array.from({ length: 100 }, () => randomUUID())]
          : Array.isArray(ids)
            ? ids.map(fill)
            : ids,
    };
    const res = await bulk(t, sent);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(res.body.message).toContain(message.replace('pending', id));
    expect(await runRow(id)).toMatchObject({ status: 'PENDING', dispatch_generation: 0 });
    expect(await runEvents(id)).toEqual([]);
    expect(await jobsOf(id)).toEqual([]);
  });

  it('an id in upper case is the run it names: queued, answered in lower case as Postgres spells it', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id);
    const res = await bulk(t, { runIds: [id.toUpperCase()] });
    expect(res.body).toEqual({ items: [{ runId: id, status: 'QUEUED', jobId: `run.${id}.g1` }] });
    expect(await runRow(id)).toMatchObject({ status: 'QUEUED', dispatch_generation: 1 });
  });

  it('requires the API key', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id);
    const res = await t.http.post('/api/runs/dispatch').send({ runIds: [id] });
    expect(res.status).toBe(401);
    expect(await runRow(id)).toMatchObject({ status: 'PENDING' });
  });
});
