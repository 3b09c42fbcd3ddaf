import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import Redis from 'ioredis';
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { MetricsService } from '../src/metrics/metrics.service';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { EnqueueBatch } from '../src/runs/enqueue-batch';
import { DeliveryRecordBatch } from '../src/webhooks/delivery-record-batch';
import { PlaneSpool } from '../src/webhooks/plane-spool';
import { NewDelivery, RecordResult } from '../src/webhooks/webhook-deliveries.repository';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv, testRedisUrl } from './support/env';
import { batchSizeDeltas } from './support/pg-observe';
import { deliver, newWorkItem, PLANE_SECRET, v1Body } from './support/plane';
import { workItemState } from './support/plane-db';
import { insertProject, insertRun } from './support/run-rows';

type Outcome = PromiseSettledResult<RecordResult>;

/**
 * Group commit on the intake's path: the new deliveries a process receives in one turn of its event
 * loop are recorded by one statement, their spool lookups share one HMGET, and the jobs of the runs
 * they create go to Bull in one addBulk. Each caller still gets what its own call would have had,
 * also when one row of a batch fails and when the connection of a batch is dropped. (API role: no
 * worker takes the runs.)
 */
describe('intake batches (group commit)', () => {
  let t: TestApp;
  let recorder: DeliveryRecordBatch;

  beforeAll(async () => {
    t = await startApp(
      testEnv('ibatch', join(tempDir('ibatch'), 'executions.log'), {
        APP_ROLE: 'api',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      }),
    );
    recorder = t.app.get(DeliveryRecordBatch);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const metrics = () => t.app.get(MetricsService);
  const deliveryBatches = batchSizeDeltas(() => metrics().deliveryBatchSize, 'onceflow_delivery_batch_size');
  const enqueueBatches = batchSizeDeltas(() => metrics().enqueueBatchSize, 'onceflow_enqueue_batch_size');
  const delivery = (over: Partial<NewDelivery> = {}): NewDelivery => ({
    provider: 'plane',
    dedupeKey: `test:${randomUUID()}`,
    externalDeliveryId: randomUUID(),
    payloadVersion: 'v1',
    event: 'issue',
    action: 'created',
    workItemId: randomUUID(),
    actorId: null,
    payload: { quote: 'a "quoted" \\ backslash, ünïcødé and an emoji 🚀', n: 1 },
    ...over,
  });
  const recordAll = (ds: NewDelivery[]): Promise<Outcome[]> => Promise.allSettled(ds.map((d) => recorder.record(d)));
  const rowOf = async (key: string) =>
    (
      await db().query(
        'SELECT id, dedupe_key, external_delivery_id, payload_version, event, action, work_item_id, actor_id, payload, duplicate_count, status FROM webhook_deliveries WHERE dedupe_key = $1',
        [key],
      )
    ).rows;

  /** Stored once, exactly as given, and answered as new with its row's id. */
  async function expectRecordedOnce(d: NewDelivery, outcome: Outcome): Promise<void> {
    const rows = await rowOf(d.dedupeKey);
    expect(rows).toHaveLength(1);
    expect(outcome).toEqual({ status: 'fulfilled', value: { kind: 'new', id: rows[0].id } });
    expect(rows[0]).toMatchObject({
      external_delivery_id: d.externalDeliveryId,
      payload_version: d.payloadVersion,
      event: d.event,
      action: d.action,
      work_item_id: d.workItemId,
      actor_id: d.actorId,
      payload: d.payload,
      duplicate_count: 0,
      status: 'accepted',
    });
  }

  it('30 new deliveries at once share one statement, each stored as it came and answered with its own row', async () => {
    const ds = Array.from({ length: 30 }, (_, i) => delivery({ actorId: i % 2 ? randomUUID() : null }));
    await deliveryBatches();
    const outcomes = await recordAll(ds);
    expect(await deliveryBatches()).toEqual({ statements: 1, rows: 30 });
    for (const [i, d] of ds.entries()) await expectRecordedOnce(d, outcomes[i]);
  });

  it('a batch mixing new deliveries and retries of stored ones: retries bump their row and are answered as duplicates', async () => {
    const stored = delivery();
    const [first] = await recordAll([stored]);
    const fresh = [delivery(), delivery()];
    await deliveryBatches();
    const outcomes = await recordAll([fresh[0], { ...stored, externalDeliveryId: randomUUID() }, fresh[1]]);
    expect(await deliveryBatches()).toEqual({ statements: 1, rows: 3 });
    const id = (first as PromiseFulfilledResult<RecordResult>).value.id;
    expect(outcomes[1]).toEqual({
      status: 'fulfilled',
      value: { kind: 'duplicate', id, status: 'accepted', takeOver: false },
    });
    expect(await rowOf(stored.dedupeKey)).toEqual([expect.objectContaining({ id, duplicate_count: 1 })]);
    await expectRecordedOnce(fresh[0], outcomes[0]);
    await expectRecordedOnce(fresh[1], outcomes[2]);
  });

  it('one body twice in one turn: two statements, one stores it, the other counts the retry', async () => {
    const d = delivery();
    await deliveryBatches();
    const outcomes = await recordAll([d, d]);
    expect(await deliveryBatches()).toEqual({ statements: 2, rows: 2 });
    const rows = await rowOf(d.dedupeKey);
    expect(rows).toEqual([expect.objectContaining({ duplicate_count: 1 })]);
    expect(outcomes.map((o) => (o as PromiseFulfilledResult<RecordResult>).value)).toEqual([
      { kind: 'new', id: rows[0].id },
      { kind: 'duplicate', id: rows[0].id, status: 'accepted', takeOver: false },
    ]);
  });

  it('a row the database refuses fails only its own caller; the rest of its batch is stored', async () => {
    // No event (NOT NULL): a fault of that one row, which the intake itself never sends.
    const ds = [delivery(), delivery({ event: null as unknown as string }), delivery(), delivery()];
    await deliveryBatches();
    const outcomes = await recordAll(ds);
    // The failed statement, then each delivery alone.
    expect(await deliveryBatches()).toEqual({ statements: 5, rows: 8 });
    expect(outcomes[1]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ code: '23502' }) });
    expect(await rowOf(ds[1].dedupeKey)).toHaveLength(0);
    for (const i of [0, 2, 3]) await expectRecordedOnce(ds[i], outcomes[i]);
  });

  /**
   * A transaction of the test's inserts `key`'s row and stays open: a batch that holds the same key
   * waits for it inside its statement. Calls `meanwhile` with the waiting backend's pid, then rolls
   * the holder back.
   */
  async function whileKeyHeld<T>(
    key: string,
    work: () => Promise<T>,
    meanwhile: (pid: number) => Promise<void>,
  ): Promise<T> {
    const tx = await db().connect();
    const waiting = async () =>
      (
        await db().query(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'onceflow' AND wait_event_type = 'Lock'`,
        )
      ).rows.map((r) => r.pid as number);
    try {
      await tx.query('BEGIN');
      await tx.query(
        `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, payload) VALUES ('plane', $1, 'v1', 'issue', '{}')`,
        [key],
      );
      const pending = work();
      pending.catch(() => undefined);
      await waitFor(async () => (await waiting()).length === 1, 5000, 'the batch to wait for the held key');
      await meanwhile((await waiting())[0]);
      await tx.query('ROLLBACK');
      return await pending;
    } finally {
      tx.release();
    }
  }

  it('a connection dropped mid-batch: every caller gets the error, nothing is stored, and a retry stores each once', async () => {
    const ds = Array.from({ length: 8 }, () => delivery());
    await deliveryBatches();
    const outcomes = await whileKeyHeld(
      ds[5].dedupeKey,
      () => recordAll(ds),
      async (pid) => {
        expect(await deliveryBatches()).toEqual({ statements: 1, rows: 8 });
        await db().query('SELECT pg_terminate_backend($1)', [pid]);
      },
    );
    for (const o of outcomes)
      expect(o).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ code: '57P01' }) });
    for (const d of ds) expect(await rowOf(d.dedupeKey)).toHaveLength(0);
    const retried = await recordAll(ds);
    for (const [i, d] of ds.entries()) await expectRecordedOnce(d, retried[i]);
  });

  it('over HTTP, the batch of a dropped connection goes to the spool: every delivery answered 2xx, each item one task', async () => {
    const items = Array.from({ length: 6 }, () => newWorkItem());
    const bodies = items.map((i) => v1Body(i, 'created'));
    // The held key is the first body's own: its batch waits, and is cut.
    const key = `sha256:${createHash('sha256').update(bodies[0]).digest('hex')}`;
    const answers = await whileKeyHeld(
      key,
      () => Promise.all(bodies.map((b) => deliver(t, b))),
      async (pid) => {
        await db().query('SELECT pg_terminate_backend($1)', [pid]);
      },
    );
    expect(answers.map((a) => a.status).every((s) => s === 202)).toBe(true);
    expect(answers.filter((a) => a.body.spooled === true).length).toBeGreaterThanOrEqual(1);
    // The drainer (this API process) takes the spooled ones once Postgres answers again.
    for (const item of items)
      await waitFor(
        async () => (await workItemState(item.id, t.config.runs.workspaceRoot)).tasks.length === 1,
        15_000,
        `the task of ${item.id}`,
      );
    for (const item of items) {
      const state = await workItemState(item.id, t.config.runs.workspaceRoot);
      expect(state.tasks).toHaveLength(1);
      expect(state.runs).toHaveLength(1);
    }
  });

  describe('spool lookups', () => {
    it('the lookups of one turn are one HMGET, each answered for its own work item', async () => {
      const spool = t.app.get(PlaneSpool);
      const ids = Array.from({ length: 12 }, () => randomUUID());
      // As an entry of that item waiting in the spool leaves it (no entry: the drainer stays idle).
      const items = `${t.config.redis.prefix}:plane-spool:items`;
      const admin = new Redis(testRedisUrl());
      await admin.hset(items, ids[4], 1);
      const redis = (spool as unknown as { redis: Redis }).redis;
      const commands: string[] = [];
      const sendCommand = redis.sendCommand.bind(redis);
      redis.sendCommand = ((cmd: { name: string }) => {
        commands.push(cmd.name);
        return sendCommand(cmd as never);
      }) as typeof redis.sendCommand;
      try {
        const held = await Promise.all(ids.map((id) => spool.holdsWorkItem(id)));
        expect(held).toEqual(ids.map((_, i) => i === 4));
        expect(commands).toEqual(['hmget']);
      } finally {
        redis.sendCommand = sendCommand;
        await admin.hdel(items, ids[4]);
        await admin.quit();
      }
    });

    it('Redis too slow to answer: each lookup says "not spooled" (the delivery goes to Postgres)', async () => {
      const spool = t.app.get(PlaneSpool);
      const admin = new Redis(testRedisUrl());
      try {
        await admin.call('CLIENT', 'PAUSE', '1500');
        const t0 = Date.now();
        expect(await Promise.all([randomUUID(), randomUUID()].map((id) => spool.holdsWorkItem(id)))).toEqual([
          false,
          false,
        ]);
        expect(Date.now() - t0).toBeLessThan(1400);
      } finally {
        await admin.call('CLIENT', 'UNPAUSE');
        await admin.quit();
      }
    });
  });

  describe('enqueues', () => {
    const queue = () => t.app.get<Queue>(getQueueToken(RUNS_QUEUE));

    it('the adds of one turn are one addBulk, and each run gets its job', async () => {
      const project = await insertProject(50);
      const runs = await Promise.all(Array.from({ length: 25 }, () => insertRun(project.id, { status: 'QUEUED' })));
      const enqueuer = t.app.get(EnqueueBatch);
      await enqueueBatches();
      const views = await Promise.all(runs.map((id) => enqueuer.enqueue({ id, dispatch_generation: 1 })));
      expect(await enqueueBatches()).toEqual({ statements: 1, rows: 25 });
      for (const [i, id] of runs.entries()) {
        expect(views[i]).toEqual({ runId: id, status: 'QUEUED', jobId: `run.${id}.g1` });
        expect((await queue().getJob(`run.${id}.g1`))?.data).toEqual({ runId: id, generation: 1 });
      }
    });

    it('Redis lost its scripts under an open connection (SCRIPT FLUSH): every add of the batch still lands', async () => {
      const project = await insertProject(50);
      const [first, ...runs] = await Promise.all(
        Array.from({ length: 11 }, () => insertRun(project.id, { status: 'QUEUED' })),
      );
      const enqueuer = t.app.get(EnqueueBatch);
      // One batch before: this connection has sent the add script, so a MULTI no longer carries it.
      await enqueuer.enqueue({ id: first, dispatch_generation: 1 });
      await queue().client.script('FLUSH');
      await Promise.all(runs.map((id) => enqueuer.enqueue({ id, dispatch_generation: 1 })));
      for (const id of runs) expect(await queue().getJob(`run.${id}.g1`)).not.toBeNull();
    });
  });
});
