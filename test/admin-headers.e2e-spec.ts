import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { randomUUID } from 'node:crypto';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';

const USER = 'ops';
const PASSWORD = 'board-pass-0123456789';
const good = { Authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` };
// supertest listens on a new ephemeral port per request, so the tests name the host themselves.
const HOST = 'board.example:8080';
const SAME = { Host: HOST, Origin: `http://${HOST}` };

const env = (tag: string, overrides: Record<string, string>) =>
  testEnv(tag, `${tempDir(tag)}/executions.log`, { APP_ROLE: 'api', ...overrides });

function expectNoFraming(res: { headers: Record<string, string> }): void {
  expect(res.headers['content-security-policy']).toBe("frame-ancestors 'none'");
  expect(res.headers['x-frame-options']).toBe('DENY');
}

describe('admin dashboard: framing and cross-origin requests', () => {
  let t: TestApp;
  let queue: Queue;
  beforeAll(async () => {
    t = await startApp(env('admin-headers', { ADMIN_USER: USER, ADMIN_PASSWORD: PASSWORD }));
    queue = t.app.get<Queue>(getQueueToken(RUNS_QUEUE));
  });
  afterAll(() => t.close());

  /** A job nobody will run (no worker in an api process, an hour's delay): only the board can touch it. */
  const parkedJob = () =>
    queue.add({ runId: randomUUID() }, { jobId: `admin-headers.${randomUUID()}`, delay: 3_600_000 });

  it.each(['/admin/queues', '/admin/queues/api/queues', '/admin/queues/static/favicon-32x32.png'])(
    'forbids framing %s, for the operator and for an unauthenticated caller alike',
    async (path) => {
      const ok = await t.http.get(path).set(good);
      expect(ok.status).toBe(200);
      expectNoFraming(ok);
      const denied = await t.http.get(path);
      expect(denied.status).toBe(401);
      expectNoFraming(denied);
    },
  );

  it.each<[string, Record<string, string>]>([
    ['an Origin of another site', { Host: HOST, Origin: 'https://evil.example' }],
    ['an Origin of another port on the same host', { Host: HOST, Origin: 'http://board.example:8081' }],
    ['no Origin, a Referer of another site', { Host: HOST, Referer: 'https://evil.example/page' }],
    ['neither Origin nor Referer', { Host: HOST }],
    ['Origin "null"', { Host: HOST, Origin: 'null' }],
  ])('refuses to clean a job for a request with %s (403, job untouched)', async (_name, headers) => {
    const job = await parkedJob();
    const res = await t.http.put(`/admin/queues/api/queues/${RUNS_QUEUE}/${job.id}/clean`).set(good).set(headers);
    expect(res.status).toBe(403);
    expectNoFraming(res);
    expect(res.body).toMatchObject({ statusCode: 403, error: 'Forbidden' });
    expect(await (await queue.getJob(job.id))?.getState()).toBe('delayed');
  });

  it('cleans the job for the same request from the dashboard itself', async () => {
    const job = await parkedJob();
    const res = await t.http.put(`/admin/queues/api/queues/${RUNS_QUEUE}/${job.id}/clean`).set(good).set(SAME);
    expect(res.status).toBe(204);
    expect(await queue.getJob(job.id)).toBeNull();
  });

  it('refuses a cross-site POST that adds a job, and accepts it from the dashboard (Referer alone is enough)', async () => {
    const path = `/admin/queues/api/queues/${RUNS_QUEUE}/add`;
    const body = { name: '__default__', data: { runId: randomUUID() }, options: { delay: 3_600_000 } };
    const delayed = () => queue.getDelayedCount();
    const before = await delayed();
    const cross = await t.http.post(path).set(good).set({ Host: HOST, Origin: 'https://evil.example' }).send(body);
    expect(cross.status).toBe(403);
    expect(await delayed()).toBe(before);
    const same = await t.http
      .post(path)
      .set(good)
      .set({ Host: HOST, Referer: `http://${HOST}/admin/queues/queue/${RUNS_QUEUE}` })
      .send(body);
    expect(same.status).toBe(200);
    expect(await delayed()).toBe(before + 1);
  });

  it('checks the origin before the credentials: a cross-site request never learns whether they were right', async () => {
    const job = await parkedJob();
    const res = await t.http
      .put(`/admin/queues/api/queues/${RUNS_QUEUE}/${job.id}/clean`)
      .set({ Host: HOST, Origin: 'https://evil.example' });
    expect(res.status).toBe(403);
    expect(await (await queue.getJob(job.id))?.getState()).toBe('delayed');
  });
});

describe('admin dashboard without credentials configured', () => {
  it('still forbids framing its 503 answer', async () => {
    const t = await startApp(env('admin-headers-off', {}));
    try {
      const res = await t.http.get('/admin/queues');
      expect(res.status).toBe(503);
      expectNoFraming(res);
    } finally {
      await t.close();
    }
  });
});
