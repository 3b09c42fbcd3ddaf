import { join } from 'node:path';
import {
  auth,
  closeDb,
  count,
  createProject,
  createRun,
  db,
  executions,
  isAlive,
  startApp,
  TestApp,
  waitFor,
  waitForStatus,
} from './support/app';
import { tempDir, testEnv } from './support/env';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

function expectErrorShape(body: Record<string, unknown>, status: number): void {
  expect(body).toEqual({ statusCode: status, error: expect.any(String), message: expect.any(String) });
}

describe('runs API', () => {
  const countFile = join(tempDir('api'), 'executions.log');
  let t: TestApp;
  let projectId: string;

  beforeAll(async () => {
    t = await startApp(testEnv('api', countFile));
    projectId = (await createProject(t.http, { maxConcurrentRuns: 10 })).id;
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  describe('bad input gets a clear 4xx in the contract shape and changes nothing', () => {
    it.each([
      ['GET', '/api/runs/not-a-uuid', 400],
      ['GET', `/api/runs/${UNKNOWN}`, 404],
      ['GET', `/api/runs/${UNKNOWN}/events`, 404],
      ['POST', '/api/runs/not-a-uuid/dispatch', 400],
      ['POST', `/api/runs/${UNKNOWN}/dispatch`, 404],
      ['POST', `/api/runs/${UNKNOWN}/retry`, 404],
      ['POST', `/api/runs/${UNKNOWN}/cancel`, 404],
      ['GET', '/api/projects/nope', 400],
      ['GET', `/api/projects/${UNKNOWN}`, 404],
      ['GET', '/api/runs?status=BOGUS', 400],
      ['GET', '/api/runs?limit=0', 400],
      ['GET', '/api/runs?cursor=garbage', 400],
      ['GET', '/api/projects?limit=0', 400],
      ['GET', '/api/projects?limit=201', 400],
      ['GET', '/api/projects?limit=two', 400],
      ['GET', '/api/projects?cursor=garbage', 400],
      ['GET', `/api/projects?cursor=${'x'.repeat(201)}`, 400],
    ])('%s %s -> %i', async (method, path, status) => {
      const res = method === 'GET' ? await t.http.get(path).set(auth) : await t.http.post(path).set(auth);
      expect(res.status).toBe(status);
      expectErrorShape(res.body, status);
    });

    it('refuses empty, blank, missing and non-JSON bodies without creating a run', async () => {
      const { rows: before } = await db().query('SELECT count(*)::int AS n FROM runs');
      const cases = [
        t.http.post(`/api/projects/${projectId}/runs`).set(auth).send({ requirement: '' }),
        t.http.post(`/api/projects/${projectId}/runs`).set(auth).send({ requirement: '   ' }),
        t.http.post(`/api/projects/${projectId}/runs`).set(auth).send({}),
        t.http.post(`/api/projects/${projectId}/runs`).set(auth),
        t.http
          .post(`/api/projects/${projectId}/runs`)
          .set(auth)
          .set('Content-Type', 'application/json')
          .send('{"requirement": '),
        t.http.post(`/api/projects/${projectId}/runs`).set(auth).send({ requirement: 42 }),
        t.http.post(`/api/projects/${projectId}/runs`).set(auth).send({ requirement: 'x', dispatch: 'yes' }),
        t.http.post(`/api/projects/${projectId}/runs`).set(auth).send({ requirement: 'x', extra: 1 }),
        t.http.post('/api/projects').set(auth).send({ name: '' }),
        t.http.post('/api/projects').set(auth).send({ name: 'x', maxConcurrentRuns: 0 }),
      ];
      for (const res of await Promise.all(cases)) {
        expect(res.status).toBe(400);
        expectErrorShape(res.body, 400);
      }
      const missing = await t.http.post(`/api/projects/${UNKNOWN}/runs`).set(auth).send({ requirement: 'x' });
      expect(missing.status).toBe(404);
      const { rows: after } = await db().query('SELECT count(*)::int AS n FROM runs');
      expect(after[0].n).toBe(before[0].n);
    });

    it('answers 409 for a project name that exists', async () => {
      const name = `dup-${Date.now()}`;
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => t.http.post('/api/projects').set(auth).send({ name })),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409]);
    });
  });

  describe('Idempotency-Key on POST /api/projects/:id/runs', () => {
    it('replays the first answer with Idempotent-Replayed: true', async () => {
      const key = `k-${Date.now()}-replay`;
      const first = await t.http
        .post(`/api/projects/${projectId}/runs`)
        .set(auth)
        .set('Idempotency-Key', key)
        .send({ requirement: 'once', dispatch: true });
      expect(first.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await t.http
        .post(`/api/projects/${projectId}/runs`)
        .set(auth)
        .set('Idempotency-Key', key)
        .send({ dispatch: true, requirement: 'once' });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.id).toBe(first.body.id);
      await waitForStatus([first.body.id], ['SUCCESS']);
      expect(count(countFile, 'done', first.body.id)).toBe(1);
    });

    it('answers 422 for the same key with another body', async () => {
      const key = `k-${Date.now()}-other`;
      expect(
        (
          await t.http
            .post(`/api/projects/${projectId}/runs`)
            .set(auth)
            .set('Idempotency-Key', key)
            .send({ requirement: 'a' })
        ).status,
      ).toBe(201);
      const other = await t.http
        .post(`/api/projects/${projectId}/runs`)
        .set(auth)
        .set('Idempotency-Key', key)
        .send({ requirement: 'b' });
      expect(other.status).toBe(422);
      expectErrorShape(other.body, 422);
    });

    it('creates one run for 12 parallel creates with one key; the others are 409 or replays', async () => {
      const key = `k-${Date.now()}-parallel`;
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          t.http
            .post(`/api/projects/${projectId}/runs`)
            .set(auth)
            .set('Idempotency-Key', key)
            .send({ requirement: 'parallel', dispatch: true }),
        ),
      );
      const created = answers.filter((a) => a.status === 201);
      expect(created.length).toBeGreaterThanOrEqual(1);
      expect(new Set(created.map((a) => a.body.id)).size).toBe(1);
      expect(answers.every((a) => a.status === 201 || a.status === 409)).toBe(true);
      for (const a of answers.filter((x) => x.status === 409)) expect(a.headers['retry-after']).toBe('1');
      const { rows } = await db().query(
        `SELECT count(*)::int AS n FROM runs WHERE project_id = $1 AND requirement = 'parallel'`,
        [projectId],
      );
      expect(rows[0].n).toBe(1);
      await waitForStatus([created[0].body.id], ['SUCCESS']);
      expect(count(countFile, 'start', created[0].body.id)).toBe(1);
    });
  });

  describe('state machine over HTTP', () => {
    it('refuses illegal transitions with 409 and a reason', async () => {
      const run = await createRun(t.http, projectId, 'finish me', true);
      await waitForStatus([run.id], ['SUCCESS']);
      const cases: Array<[string, RegExp]> = [
        ['dispatch', /succeeded/],
        ['retry', /only a FAILED run/],
        ['cancel', /SUCCESS/],
      ];
      for (const [verb, reason] of cases) {
        const res = await t.http.post(`/api/runs/${run.id}/${verb}`).set(auth);
        expect(res.status).toBe(409);
        expect(res.body.message).toMatch(reason);
      }
      const events = await t.http.get(`/api/runs/${run.id}/events`).set(auth);
      expect(events.body.items.map((e: { to: string }) => e.to)).toEqual(['QUEUED', 'RUNNING', 'SUCCESS']);
      expect(events.body.items[1]).toMatchObject({
        from: 'QUEUED',
        attempt: 1,
        workerId: expect.any(String),
        reason: 'claimed',
      });
    });

    it('cancels a PENDING run, and a RUNNING one within a heartbeat (the command is killed)', async () => {
      const pending = await createRun(t.http, projectId, 'never runs');
      expect((await t.http.post(`/api/runs/${pending.id}/cancel`).set(auth)).status).toBe(202);
      expect((await t.http.post(`/api/runs/${pending.id}/dispatch`).set(auth)).status).toBe(409);

      const running = await createRun(t.http, projectId, 'sleep=8', true);
      await waitFor(() => count(countFile, 'start', running.id) === 1, 10_000, 'the long command to start');
      const cancelledAt = Date.now();
      const res = await t.http.post(`/api/runs/${running.id}/cancel`).set(auth);
      expect(res.status).toBe(202);
      expect(res.body.status).toBe('CANCELLED');
      const pid = executions(countFile).find((e) => e.runId === running.id)!.pid;
      await waitFor(() => !isAlive(pid), t.config.runs.lockTtlMs + 1000, 'the cancelled command to be killed');
      expect(Date.now() - cancelledAt).toBeLessThan(t.config.runs.lockTtlMs);
      expect(count(countFile, 'done', running.id)).toBe(0);
      const run = await t.http.get(`/api/runs/${running.id}`).set(auth);
      expect(run.body.status).toBe('CANCELLED');
    });
  });

  it('lists runs newest first with a cursor', async () => {
    const p = await createProject(t.http);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createRun(t.http, p.id, `page ${i}`)).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: { items: Array<{ id: string }>; nextCursor: string | null } } = await t.http
        .get('/api/runs')
        .query({ projectId: p.id, limit: 2, ...(cursor ? { cursor } : {}) })
        .set(auth);
      expect(res.status).toBe(200);
      seen.push(...res.body.items.map((r: { id: string }) => r.id));
      cursor = res.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
  });

  it('lists projects newest first with a cursor, every one once', async () => {
    // Other tests of this file create projects too: collect every page, then look at ours.
    const ours: string[] = [];
    for (let i = 0; i < 5; i++) ours.push((await createProject(t.http, { maxConcurrentRuns: i + 1 })).id);
    const seen: Array<{ id: string; name: string; maxConcurrentRuns: number; createdAt: string }> = [];
    let cursor: string | null = null;
    let pages = 0;
    // The run's database holds every suite's projects so far: the cap on pages (against a cursor
    // that never ends) follows from their count, not from a guess at it.
    const { rows } = await db().query<{ n: number }>('SELECT count(*)::int AS n FROM projects');
    const maxPages = Math.ceil(rows[0].n / 2) + 1;
    do {
      const res: { status: number; body: { items: typeof seen; nextCursor: string | null } } = await t.http
        .get('/api/projects')
        .query({ limit: 2, ...(cursor ? { cursor } : {}) })
        .set(auth);
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.items);
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor && pages < maxPages);
    expect(cursor).toBeNull();
    expect(seen).toHaveLength(rows[0].n);
    expect(new Set(seen.map((p) => p.id)).size).toBe(seen.length);
    expect(seen.filter((p) => ours.includes(p.id)).map((p) => p.id)).toEqual([...ours].reverse());
    const createdAt = seen.map((p) => Date.parse(p.createdAt));
    expect(createdAt).toEqual([...createdAt].sort((a, b) => b - a));
    const third = seen.find((p) => p.id === ours[2])!;
    expect(third).toMatchObject({ maxConcurrentRuns: 3, name: expect.stringMatching(/^p-/) });
  });

  it('answers a page of 50 projects by default', async () => {
    const { rows } = await db().query('SELECT count(*)::int AS n FROM projects');
    const res = await t.http.get('/api/projects').set(auth);
    expect(res.status).toBe(200);
    expect(res.body.items).toHaveLength(Math.min(50, rows[0].n));
    expect(res.body.nextCursor === null).toBe(rows[0].n <= 50);
  });
});
