import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testDatabaseUrl, testEnv } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, v1Body } from './support/plane';
import { TcpProxy } from './support/tcp-proxy';

/**
 * A retry of a delivery this process saw settle costs no Postgres round trip: Postgres behind a
 * proxy the test cuts, and the retries are still answered "duplicate" (not spooled, which is what
 * reaching an unreachable Postgres gives); their count lands on the row once it is back.
 */
describe('retries of settled deliveries', () => {
  const pg = TcpProxy.for(testDatabaseUrl(), 5432);
  let t: TestApp;

  beforeAll(async () => {
    await pg.start();
    t = await startApp(
      testEnv('wh-settled', join(tempDir('wh-settled'), 'executions.log'), {
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
        DATABASE_URL: pg.url(testDatabaseUrl()),
        APP_ROLE: 'api',
      }),
    );
  });
  afterAll(async () => {
    pg.restore();
    await t?.close();
    await pg.stop();
    await closeDb();
  });

  it('answers a retry of a processed delivery from memory, and folds its count in later', async () => {
    const body = v1Body(newWorkItem(), 'created');
    const first = await deliver(t, body);
    expect(first.status).toBe(202);
    const id = first.body.deliveryId as string;
    pg.cut();
    const retries = [];
    for (let i = 0; i < 5; i++) retries.push(await deliver(t, body));
    expect(retries.map((r) => [r.status, r.body])).toEqual(
      Array(5).fill([200, { status: 'duplicate', deliveryId: id }]),
    );
    pg.restore();
    await waitFor(
      async () =>
        (await db().query('SELECT duplicate_count FROM webhook_deliveries WHERE id = $1', [id])).rows[0]
          .duplicate_count === 5,
      15_000,
      'the five retries to be counted on the row',
    );
  });

  it('a retry of a delivery that has not settled still goes to Postgres (which may hand it the processing)', async () => {
    // A body this process never saw settle (another replica's, or from before a restart).
    const other = v1Body(newWorkItem(), 'created');
    await db().query(
      `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, status, payload)
       VALUES ('plane', $1, 'v1', 'issue', 'processed', '{}')`,
      [`sha256:${createHash('sha256').update(other).digest('hex')}`],
    );
    pg.cut();
    const retry = await deliver(t, other);
    pg.restore();
    // It needed Postgres: with Postgres away, it was spooled instead of answered from memory.
    expect(retry.status).toBe(202);
    expect(retry.body).toMatchObject({ status: 'accepted', spooled: true });
  });
});
