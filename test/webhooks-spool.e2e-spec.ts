import Redis from 'ioredis';
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { MetricsService } from '../src/metrics/metrics.service';
import { PlaneSpool } from '../src/webhooks/plane-spool';
import { SPOOL_LOCK_KEY } from '../src/webhooks/plane-spool-drainer';
import { closeDb, count, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testDatabaseUrl, testEnv, testRedisUrl } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, v1Body, v2Body } from './support/plane';
import { workItemState } from './support/plane-db';
import { TcpProxy } from './support/tcp-proxy';

const SPOOLED = { status: 'accepted', spooled: true };
/** Plane's sender gives up after 30 s; a dead Postgres must be answered long before. */
const ANSWER_WITHIN_MS = 8000;

const dedupeKey = (body: string) => `sha256:${createHash('sha256').update(body).digest('hex')}`;

/**
 * Postgres behind a TCP proxy the test cuts: signed deliveries that arrive meanwhile go to the
 * Redis spool (202), and are processed through the same idempotent path, once, when it is back.
 * Two app instances share the spool: `a` runs every role (it also executes the runs), `b` is a
 * second API replica, so two drainers compete for it.
 */
describe('Plane deliveries while Postgres is unreachable', () => {
  const countFile = join(tempDir('wh-spool'), 'executions.log');
  const pg = TcpProxy.for(testDatabaseUrl(), 5432);
  let a: TestApp;
  let b: TestApp;
  let redis: Redis;
  let prefix: string;
  const spoolLength = () => redis.llen(`${prefix}:plane-spool:entries`);

  beforeAll(async () => {
    await pg.start();
    const env = testEnv('wh-spool', countFile, {
      PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      DATABASE_URL: pg.url(testDatabaseUrl()),
    });
    prefix = env.REDIS_PREFIX;
    a = await startApp(env);
    b = await startApp({ ...env, APP_ROLE: 'api' });
    redis = new Redis(testRedisUrl());
  });
  // A test that failed while holding the drain lease must not hold up the next one.
  afterEach(async () => {
    pg.restore();
    await redis.del(`${prefix}:lock:${SPOOL_LOCK_KEY}`);
  });
  afterAll(async () => {
    pg.restore();
    await b?.close();
    await a?.close();
    await pg.stop();
    await redis.quit();
    await closeDb();
  });

  async function spooledDeliveries(bodies: Array<[TestApp, string]>): Promise<void> {
    const answers = await Promise.all(
      bodies.map(async ([app, body]) => {
        const at = performance.now();
        const res = await deliver(app, body);
        return { status: res.status, body: res.body, ms: performance.now() - at };
      }),
    );
    for (const ans of answers)
      expect({ status: ans.status, body: ans.body, fast: ans.ms < ANSWER_WITHIN_MS }).toEqual({
        status: 202,
        body: SPOOLED,
        fast: true,
      });
  }

  const metric = async (outcome: string) => {
    let n = 0;
    for (const app of [a, b])
      n += (await app.app.get(MetricsService).spool.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
    return n;
  };

  async function holdDrainLock(ttlMs: number): Promise<{ release(): Promise<void> }> {
    const locks = a.app.get<LockService>(LOCK_SERVICE);
    let handle = await locks.acquire(SPOOL_LOCK_KEY, ttlMs);
    // A drainer may hold it for a moment (a poll finding the spool empty takes no lock, a drain does).
    await waitFor(
      async () => (handle ??= await locks.acquire(SPOOL_LOCK_KEY, ttlMs)) !== null,
      20_000,
      'the drain lock',
    );
    return { release: async () => void (await locks.release(handle!)) };
  }

  /** Holds an exclusive lock on `tasks` until released: a task insert then waits, mid-transaction. */
  async function blockTasks(): Promise<{ waiting(): Promise<boolean>; release(): Promise<void> }> {
    const blocker = await db().connect();
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE');
    return {
      waiting: async () => {
        const { rows } = await db().query(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted AND c.relname = 'tasks'`,
        );
        return rows[0].n > 0;
      },
      release: async () => {
        await blocker.query('ROLLBACK');
        blocker.release();
      },
    };
  }

  it('every delivery during the cut gets a 2xx; after it: one task, run and workspace per item, each run executed once', async () => {
    const items = Array.from({ length: 6 }, () => newWorkItem());
    const v2Items = items.slice(4);
    const v2Ids = new Map(v2Items.map((i) => [i.id, randomUUID()]));
    const bodies: Array<[TestApp, string]> = [];
    const copies = new Map<string, number>();
    items.forEach((item, n) => {
      const created = v2Ids.has(item.id)
        ? v2Body(item, 'workitem.created', { eventId: v2Ids.get(item.id) })
        : v1Body(item, 'created');
      const updated = v1Body(item, 'updated', { field: 'name', updatedAt: '2026-11-02T09:05:00.000000Z' });
      // Plane's identical duplicates: the same bytes three times, to both replicas.
      for (const [i, body] of [created, created, created, updated].entries()) {
        bodies.push([(n + i) % 2 ? b : a, body]);
        copies.set(body, (copies.get(body) ?? 0) + 1);
      }
    });
    const createdThenDeleted = newWorkItem();

    pg.cut();
    await spooledDeliveries(bodies);
    // Order per work item: created, then deleted (sent one after the other, to different replicas).
    await spooledDeliveries([[a, v1Body(createdThenDeleted, 'created')]]);
    await spooledDeliveries([[b, v1Body(createdThenDeleted, 'deleted')]]);
    expect(await spoolLength()).toBe(bodies.length + 2);
    expect(await metric('spooled')).toBe(bodies.length + 2);
    const depths = await Promise.all(
      [a, b].map(async (app) => (await app.app.get(MetricsService).spoolDepth.get()).values[0]?.value ?? 0),
    );
    expect(Math.max(...depths)).toBe(bodies.length + 2);
    pg.restore();

    await waitFor(async () => (await spoolLength()) === 0, 30_000, 'the spool to drain');
    const states = await Promise.all(items.map((i) => workItemState(i.id, a.config.runs.workspaceRoot)));
    for (const s of states) {
      expect(s.tasks).toHaveLength(1);
      expect(s.runs).toHaveLength(1);
    }
    const runIds = states.map((s) => s.runs[0].id);
    await waitFor(() => runIds.every((id) => count(countFile, 'done', id) === 1), 30_000, 'every run to be executed');
    for (const id of runIds) expect(count(countFile, 'start', id)).toBe(1);
    // The worker makes a task's workspace when its run starts: one each, once they have run.
    for (const i of items) expect((await workItemState(i.id, a.config.runs.workspaceRoot)).workspaces).toHaveLength(1);
    // Deleted after created, as Plane sent them: the task is cancelled, not left open.
    const deleted = await workItemState(createdThenDeleted.id, a.config.runs.workspaceRoot);
    expect(deleted.tasks.map((t) => t.status)).toEqual(['cancelled']);
    expect(deleted.runs).toHaveLength(1);
    expect(count(countFile, 'start', deleted.runs[0].id)).toBeLessThanOrEqual(1);

    // Each distinct body recorded once; its copies counted as duplicates, none processed twice.
    for (const [body, n] of copies) {
      const v2 = JSON.parse(body).event_id as string | undefined;
      const { rows } = await db().query(
        'SELECT status, duplicate_count FROM webhook_deliveries WHERE dedupe_key = $1',
        [v2 ? `event:${v2}` : dedupeKey(body)],
      );
      expect(rows).toEqual([{ status: expect.stringMatching(/^(processed|duplicate)$/), duplicate_count: n - 1 }]);
    }
    expect(await metric('drained')).toBe(bodies.length + 2);
  });

  it('a live delivery for a work item that still has entries in the spool queues behind them', async () => {
    const lock = await holdDrainLock(60_000);
    const spooledItem = newWorkItem();
    const other = newWorkItem();
    pg.cut();
    await spooledDeliveries([[a, v1Body(spooledItem, 'created')]]);
    pg.restore();
    // Postgres is back but the drainer is busy (we hold its lease): the delete must wait its turn.
    const del = await deliver(b, v1Body(spooledItem, 'deleted'));
    expect(del.status).toBe(202);
    expect(del.body).toEqual(SPOOLED);
    // Another work item is not held up.
    const direct = await deliver(b, v1Body(other, 'created'));
    expect(direct.status).toBe(202);
    expect(direct.body).toEqual({ status: 'accepted', deliveryId: expect.any(String) });
    expect((await workItemState(spooledItem.id, a.config.runs.workspaceRoot)).tasks).toHaveLength(0);
    await lock.release();
    await waitFor(async () => (await spoolLength()) === 0, 30_000, 'the spool to drain');
    expect((await workItemState(spooledItem.id, a.config.runs.workspaceRoot)).tasks.map((t) => t.status)).toEqual([
      'cancelled',
    ]);
  });

  it('an entry whose processing loses Postgres midway stays in the spool and is processed once when it is back', async () => {
    const lock = await holdDrainLock(60_000);
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    pg.cut();
    await spooledDeliveries([[a, body]]);
    pg.restore();
    // The task insert will wait on this lock: the drainer is then stuck mid-entry, its delivery row written.
    const tasks = await blockTasks();
    try {
      await lock.release();
      await waitFor(
        async () => {
          const { rows } = await db().query('SELECT count(*)::int AS n FROM webhook_deliveries WHERE dedupe_key = $1', [
            dedupeKey(body),
          ]);
          return (await tasks.waiting()) && rows[0].n === 1;
        },
        20_000,
        'a drainer blocked inside the task insert',
      );
      pg.cut();
    } finally {
      await tasks.release();
    }
    expect(await spoolLength()).toBe(1);
    pg.restore();
    await waitFor(async () => (await spoolLength()) === 0, 30_000, 'the spool to drain');
    const state = await workItemState(item.id, a.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toHaveLength(1);
    await waitFor(() => count(countFile, 'done', state.runs[0].id) === 1, 30_000, 'the run to be executed');
    expect(count(countFile, 'start', state.runs[0].id)).toBe(1);
    expect((await workItemState(item.id, a.config.runs.workspaceRoot)).workspaces).toHaveLength(1);
    const { rows } = await db().query('SELECT status, reason FROM webhook_deliveries WHERE dedupe_key = $1', [
      dedupeKey(body),
    ]);
    expect(rows).toEqual([{ status: 'processed', reason: 'task_created' }]);
  });

  it('a direct delivery that loses Postgres after its row was written is spooled, and finished once from its row', async () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    const tasks = await blockTasks();
    let answer: Awaited<ReturnType<typeof deliver>>;
    try {
      // supertest sends on then(): start it now, await it later.
      const pending = deliver(a, body).then((res) => res);
      await waitFor(() => tasks.waiting(), 20_000, 'the delivery blocked inside the task insert');
      pg.cut();
      answer = await pending;
    } finally {
      await tasks.release();
    }
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual(SPOOLED);
    pg.restore();
    await waitFor(async () => (await spoolLength()) === 0, 30_000, 'the spool to drain');
    const state = await workItemState(item.id, a.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toHaveLength(1);
    // Finished from the row it had (no second record: Plane sent it once, so no duplicate is counted).
    const { rows } = await db().query('SELECT status, duplicate_count FROM webhook_deliveries WHERE dedupe_key = $1', [
      dedupeKey(body),
    ]);
    expect(rows).toEqual([{ status: 'processed', duplicate_count: 0 }]);
  });

  it('an entry that keeps failing for another reason goes to the dead list and stops blocking the spool', async () => {
    const lock = await holdDrainLock(60_000);
    const poison = await a.app.get(PlaneSpool).push({
      dedupeKey: 'sha256:poison',
      workItemId: randomUUID(),
      externalDeliveryId: null,
      deliveryId: null,
      body: '{"not": "a plane body"',
    });
    const item = newWorkItem();
    pg.cut();
    await spooledDeliveries([[a, v1Body(item, 'created')]]);
    pg.restore();
    await lock.release();
    await waitFor(async () => (await spoolLength()) === 0, 60_000, 'the spool to drain past the poison entry');
    expect((await workItemState(item.id, a.config.runs.workspaceRoot)).tasks).toHaveLength(1);
    const dead = await redis.lrange(`${prefix}:plane-spool:dead`, 0, -1);
    expect(dead.map((e) => e.split('\n')[0])).toEqual([poison.id]);
    expect(await metric('dead_lettered')).toBe(1);
  });

  it('entries wait while a dead drainer’s lease lives, then its half-done entry is finished once', async () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    await holdDrainLock(60_000);
    pg.cut();
    await spooledDeliveries([[b, body]]);
    pg.restore();
    // What a drainer killed mid-entry leaves: the entry at the head, its delivery row written, no task.
    await db().query(
      `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, action, work_item_id, payload)
       VALUES ('plane', $1, 'v1', 'issue', 'created', $2, $3)`,
      [dedupeKey(body), item.id, JSON.parse(body)],
    );
    // ... and its lease, which nobody renews any more: it lapses in 3 s (a few of the drainers' polls).
    expect(await redis.pexpire(`${prefix}:lock:${SPOOL_LOCK_KEY}`, 3000)).toBe(1);
    const locks = a.app.get<LockService>(LOCK_SERVICE);
    let tasksWhileHeld = 0;
    await waitFor(
      async () => {
        const tasks = (await workItemState(item.id, a.config.runs.workspaceRoot)).tasks.length;
        const held = (await locks.remainingMs(SPOOL_LOCK_KEY)) > 0;
        if (held) tasksWhileHeld = Math.max(tasksWhileHeld, tasks);
        return !held;
      },
      10_000,
      'the dead drainer’s lease to lapse',
    );
    expect(tasksWhileHeld).toBe(0);
    await waitFor(async () => (await spoolLength()) === 0, 30_000, 'the spool to drain');
    const state = await workItemState(item.id, a.config.runs.workspaceRoot);
    expect(state.tasks).toHaveLength(1);
    expect(state.runs).toHaveLength(1);
    const { rows } = await db().query('SELECT status FROM webhook_deliveries WHERE dedupe_key = $1', [dedupeKey(body)]);
    expect(rows).toEqual([{ status: 'processed' }]);
  });
});
