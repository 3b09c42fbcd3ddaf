import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { API_POOL_SIZE } from '../src/config/roles';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { newWorkItem, PLANE_SECRET, sign, v1Body } from './support/plane';

/**
 * The API process's Postgres pool does not follow WORKER_CONCURRENCY: its requests hold a
 * connection for one statement or a short transaction, and the pool sized for 32 runs (69
 * connections) let the bench's 64 concurrent deliveries keep as many backends queueing on each
 * other's WAL flushes and locks, at 2.3–2.6 times the Postgres CPU per new item. Counted from
 * Postgres: the backends the app holds while its statements wait.
 */
describe('the API role sizes its own Postgres pool', () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await startApp(
      testEnv('apipool', join(tempDir('apipool'), 'executions.log'), {
        APP_ROLE: 'api',
        WORKER_CONCURRENCY: '32',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      }),
    );
    // A real listener and one connection per request (fetch opens as many as are in flight), so
    // the requests reach the app together as they would from Plane's senders.
    const server = await t.app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const post = async (body: string): Promise<number> => {
    const res = await fetch(`${base}/webhooks/plane`, {
      method: 'POST',
      body,
      headers: {
        'Content-Type': 'application/json',
        'X-Plane-Delivery': randomUUID(),
        'X-Plane-Event': 'issue',
        'X-Plane-Signature': sign(body),
      },
    });
    await res.arrayBuffer();
    return res.status;
  };

  const appBackends = async (): Promise<number> => {
    const { rows } = await db().query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'onceflow'`,
    );
    return rows[0].n;
  };

  it('64 new work items at once, held up in Postgres: all accepted, one task each, through at most its own pool', async () => {
    expect(t.config.database.poolSize).toBe(API_POOL_SIZE);
    const project = newWorkItem().project;
    const items = Array.from({ length: 64 }, (_, i) => newWorkItem({ project, name: `pool item ${i}` }));
    // The project first, alone: its first item is the one that creates it (a transaction).
    expect(await post(v1Body(items[0], 'created'))).toBe(202);
    // Each new task's foreign key waits on this row lock, holding its connection meanwhile: the
    // pool grows as far as it may (without its own size, to one connection per request).
    const blocker = await db().connect();
    let answers: Promise<number[]>;
    let held: number;
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT id FROM projects WHERE external_provider = 'plane' AND external_id = $1 FOR UPDATE`, [
        project,
      ]);
      answers = Promise.all(items.slice(1).map((item) => post(v1Body(item, 'created'))));
      const waiting = async () =>
        (
          await db().query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'onceflow' AND wait_event_type = 'Lock'`,
          )
        ).rows[0].n;
      // Until the waiting statements stop growing in number: the pool is as large as it gets.
      held = await waitForSteady(waiting);
    } finally {
      await blocker.query('COMMIT');
      blocker.release();
    }
    const statuses = await answers;
    expect(statuses).toEqual(statuses.map(() => 202));
    expect(held).toBeGreaterThan(1);
    expect(held).toBeLessThanOrEqual(API_POOL_SIZE);
    // Idle connections stay in the pool (10 s), so this counts every one the app opened.
    expect(await appBackends()).toBeLessThanOrEqual(API_POOL_SIZE);
    const { rows } = await db().query<{ n: number }>(
      `SELECT count(*)::int AS n FROM tasks WHERE external_provider = 'plane' AND external_id = ANY($1)`,
      [items.map((i) => i.id)],
    );
    expect(rows[0].n).toBe(64);
  });
});

/** Polls `read` until it has answered the same non-zero value for 300 ms (at most 3 s); that value. */
async function waitForSteady(read: () => Promise<number>): Promise<number> {
  let last = -1;
  let since = Date.now();
  const deadline = Date.now() + 3000;
  for (;;) {
    const n = await read();
    if (n !== last) [last, since] = [n, Date.now()];
    if ((n > 0 && Date.now() - since >= 300) || Date.now() > deadline) return n;
    await new Promise((r) => setTimeout(r, 20));
  }
}
