import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testDatabaseUrl, testEnv } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, v1Body, v2Body } from './support/plane';
import { TcpProxy } from './support/tcp-proxy';

/**
 * A retry of a delivery this process saw settle costs no Postgres round trip: Postgres behind a
 * proxy the test cuts, and the retries are still answered "duplicate" (not spooled, which is what
 * reaching an unreachable Postgres gives); their count lands on the row once it is back.
 */
/** Waits until the retries answered from memory are folded into the delivery's row. */
const countedOnRow = (id: string, n: number) =>
  waitFor(
    async () =>
      (await db().query('SELECT duplicate_count FROM webhook_deliveries WHERE id = $1', [id])).rows[0]
        .duplicate_count === n,
    15_000,
    `${n} retries to be counted on the row`,
  );

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
    await countedOnRow(id, 5);
  });

  it('a v2 delivery: its byte-identical retry and another body of the same event id are both answered from memory', async () => {
    const item = newWorkItem();
    const eventId = randomUUID();
    const body = v2Body(item, 'workitem.created', { eventId });
    const first = await deliver(t, body);
    expect(first.status).toBe(202);
    const id = first.body.deliveryId as string;
    pg.cut();
    // Plane's retry (the same bytes) is known by its bytes; a re-sent event (new delivery id) by its event id.
    const same = await deliver(t, body);
    const resent = await deliver(t, v2Body(item, 'workitem.created', { eventId }));
    pg.restore();
    expect([same, resent].map((r) => [r.status, r.body])).toEqual(
      Array(2).fill([200, { status: 'duplicate', deliveryId: id }]),
    );
    await countedOnRow(id, 2);
  });

  it('answers retries of a delivery it is still processing from memory, not behind that row in Postgres', async () => {
    // An earlier item made the project; the test holds the project's row, so the first attempt's
    // task insert (its foreign key) waits on it after the delivery row was written.
    const project = randomUUID();
    expect((await deliver(t, v1Body(newWorkItem({ project }), 'created'))).status).toBe(202);
    const body = v1Body(newWorkItem({ project }), 'created');
    const key = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    const holder = await db().connect();
    let held = true;
    const release = async () => {
      if (held) await holder.query('COMMIT');
      held = false;
    };
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM projects WHERE external_provider = $1 AND external_id = $2 FOR UPDATE', [
        'plane',
        project,
      ]);
      const first = deliver(t, body).then((r) => r);
      await waitFor(
        async () =>
          (
            await db().query(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO tasks%'`,
            )
          ).rows[0].n === 1,
        10_000,
        'the first attempt to wait on the project row',
      );
      // Its delivery row is locked as well (by the waiting statement, or here): a retry that went
      // to Postgres would wait for it.
      await holder.query('SELECT 1 FROM webhook_deliveries WHERE dedupe_key = $1 FOR UPDATE SKIP LOCKED', [key]);
      const retries = Promise.all(Array.from({ length: 8 }, () => deliver(t, body).then((r) => r)));
      const answered = await Promise.race([retries, new Promise<null>((r) => setTimeout(() => r(null), 5_000))]);
      expect(answered?.map((r) => [r.status, r.body.status])).toEqual(Array(8).fill([200, 'duplicate']));
      await release();
      const done = await first;
      expect(done.status).toBe(202);
      expect(answered!.map((r) => r.body.deliveryId)).toEqual(Array(8).fill(done.body.deliveryId));
      await countedOnRow(done.body.deliveryId as string, 8);
    } finally {
      await release();
      holder.release();
    }
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
