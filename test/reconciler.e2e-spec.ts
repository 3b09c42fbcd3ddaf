import Redis from 'ioredis';
import { join } from 'node:path';
import {
  auth,
  closeDb,
  count,
  createProject,
  createRun,
  db,
  executions,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  waitForStatus,
} from './support/app';
import { tempDir, testEnv, testRedisUrl, uniquePrefix } from './support/env';

/** Wipes every Redis key of the app (its queue, locks and fence counters), as a restart without persistence would. */
async function wipeRedis(redis: Redis, prefix: string): Promise<number> {
  let n = 0;
  for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 })) {
    if ((keys as string[]).length) n += await redis.del(...(keys as string[]));
  }
  return n;
}

describe('reaper and queue reconciler: Postgres is the truth, Redis is rebuilt', () => {
  const countFile = join(tempDir('reconcile'), 'executions.log');
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(testRedisUrl());
  });
  afterAll(async () => {
    await redis.quit();
    await closeDb();
  });

  it('a worker killed AND its job lost: the reaper puts the run back and it finishes once', async () => {
    const env = testEnv('reap', countFile, { REDIS_PREFIX: uniquePrefix('reap'), RECONCILE_INTERVAL_MS: '500' });
    const victim = await startProcess(env);
    const api = await startApp({ ...env, APP_ROLE: 'api' });
    try {
      const project = await createProject(api.http);
      const run = await createRun(api.http, project.id, 'sleep=3', true);
      await waitFor(() => count(countFile, 'start', run.id) === 1, 15_000, 'the first attempt to start');
      victim.child.kill('SIGKILL');
      // Bull cannot redeliver a job it no longer has: only Postgres remembers the run.
      expect(await wipeRedis(redis, env.REDIS_PREFIX)).toBeGreaterThan(0);
      const survivor = await startApp(env); // role all: worker + scheduler
      try {
        await waitForStatus([run.id], ['SUCCESS'], 30_000);
      } finally {
        await survivor.close();
      }
      expect(count(countFile, 'done', run.id)).toBe(1);
      const events = (await api.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items as Array<{
        to: string;
        reason: string;
      }>;
      expect(events.some((e) => e.to === 'RETRYING' && /reaper/.test(e.reason))).toBe(true);
    } finally {
      await victim.stop('SIGKILL');
      await api.close();
    }
  });

  it('Redis wiped mid-load: every run still finishes, each executed exactly once', async () => {
    const env = testEnv('wipe', countFile, {
      REDIS_PREFIX: uniquePrefix('wipe'),
      RECONCILE_INTERVAL_MS: '500',
      WORKER_CONCURRENCY: '6',
    });
    const app: TestApp = await startApp(env);
    try {
      const project = await createProject(app.http, { maxConcurrentRuns: 6 });
      const runs = await Promise.all(
        Array.from({ length: 20 }, (_, i) => createRun(app.http, project.id, `sleep=1.5 wipe ${i}`, true)),
      );
      const ids = runs.map((r) => r.id);
      await waitFor(
        () => executions(countFile).filter((e) => ids.includes(e.runId) && e.kind === 'start').length >= 4,
        15_000,
        'some runs to start',
      );
      const runningAtWipe = ids.filter(
        (id) => count(countFile, 'start', id) === 1 && count(countFile, 'done', id) === 0,
      );
      expect(await wipeRedis(redis, env.REDIS_PREFIX)).toBeGreaterThan(0);
      await waitForStatus(ids, ['SUCCESS'], 60_000);
      for (const id of ids) expect(count(countFile, 'done', id)).toBe(1);
      // The commands running when the lock keys vanished were not killed: their runs' leases in
      // Postgres were still theirs, so each lock was taken again and each command ran once.
      expect(runningAtWipe.length).toBeGreaterThanOrEqual(4);
      for (const id of ids) expect(count(countFile, 'start', id)).toBe(1);
      const { rows } = await db().query(
        `SELECT count(*)::int AS n FROM runs WHERE id = ANY($1) AND status <> 'SUCCESS'`,
        [ids],
      );
      expect(rows[0].n).toBe(0);
    } finally {
      await app.close();
    }
  });
});
