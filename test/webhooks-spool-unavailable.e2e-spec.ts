import { join } from 'node:path';
import { MetricsService } from '../src/metrics/metrics.service';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testDatabaseUrl, testEnv, testRedisUrl } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, v1Body, WorkItem } from './support/plane';
import { workItemState } from './support/plane-db';
import { TcpProxy } from './support/tcp-proxy';

const SPOOLED = { status: 'accepted', spooled: true };
/** Plane's sender gives up after 30 s; a dead Postgres must be answered long before. */
const ANSWER_WITHIN_MS = 8000;

/** Postgres and Redis each behind a TCP proxy (test/webhooks-spool covers the spool's draining). */
describe('Plane deliveries when Postgres hangs, and when Redis is gone too', () => {
  const countFile = join(tempDir('wh-spool-503'), 'executions.log');
  const pg = TcpProxy.for(testDatabaseUrl(), 5432);
  const rd = TcpProxy.for(testRedisUrl(), 6379);
  let t: TestApp;

  beforeAll(async () => {
    await pg.start();
    await rd.start();
    t = await startApp(
      testEnv('wh-spool-503', countFile, {
        APP_ROLE: 'api',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
        DATABASE_URL: pg.url(testDatabaseUrl()),
        REDIS_URL: rd.url(testRedisUrl()),
      }),
    );
  });
  afterAll(async () => {
    pg.restore();
    rd.restore();
    await t?.close();
    await Promise.all([pg.stop(), rd.stop()]);
    await closeDb();
  });

  const rowsFor = async (item: WorkItem) =>
    (await db().query('SELECT count(*)::int AS n FROM webhook_deliveries WHERE work_item_id = $1', [item.id])).rows[0]
      .n;

  it('a Postgres that accepts no connection (a black hole) is given up on within a few seconds: spooled', async () => {
    const item = newWorkItem();
    pg.hang();
    const at = performance.now();
    const res = await deliver(t, v1Body(item, 'created'));
    const ms = performance.now() - at;
    pg.restore();
    expect({ status: res.status, body: res.body, fast: ms < ANSWER_WITHIN_MS }).toEqual({
      status: 202,
      body: SPOOLED,
      fast: true,
    });
    await waitFor(
      async () => (await workItemState(item.id, t.config.runs.workspaceRoot)).tasks.length === 1,
      30_000,
      'the spooled item to become a task',
    );
  });

  it('answers 503 only when the spool cannot take the delivery either, and stores nothing', async () => {
    const item = newWorkItem();
    pg.cut();
    rd.cut();
    const at = performance.now();
    const res = await deliver(t, v1Body(item, 'created'));
    const ms = performance.now() - at;
    expect({ status: res.status, fast: ms < ANSWER_WITHIN_MS }).toEqual({ status: 503, fast: true });
    expect(res.body).toMatchObject({ statusCode: 503, message: expect.stringMatching(/spool/) });
    const refused = (await t.app.get(MetricsService).spool.get()).values.find(
      (v) => v.labels.outcome === 'refused',
    )?.value;
    expect(refused).toBe(1);
    pg.restore();
    rd.restore();
    await waitFor(
      async () => (await t.http.get('/health/ready')).status === 200,
      30_000,
      'Postgres and Redis to be back',
    );
    expect(await rowsFor(item)).toBe(0);
    expect((await workItemState(item.id, t.config.runs.workspaceRoot)).tasks).toHaveLength(0);
  });
});
