import { getDataSourceToken } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { PlaneIntakeService, PlaneRequest } from '../src/webhooks/plane-intake.service';
import { NewDelivery, WebhookDeliveriesRepository } from '../src/webhooks/webhook-deliveries.repository';
import { DeliveryStatus } from '../src/webhooks/webhook-delivery.entity';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { newWorkItem, PLANE_SECRET, sign, v1Body } from './support/plane';
import { WebhooksErrorCode } from '../src/webhooks/webhooks.errors';

/** PlaneIntakeService.receive/replay called directly: the request shapes HTTP never sends. */
describe('PlaneIntakeService', () => {
  const countFile = join(tempDir('intake-svc'), 'executions.log');
  let t: TestApp;
  let intake: PlaneIntakeService;

  beforeAll(async () => {
    t = await startApp(testEnv('intake-svc', countFile, { APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET }));
    intake = t.app.get(PlaneIntakeService);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const request = (body: string, over: Partial<PlaneRequest> = {}): PlaneRequest => ({
    rawBody: Buffer.from(body),
    body: JSON.parse(body),
    signature: sign(body),
    deliveryHeader: undefined,
    ...over,
  });
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: unknown) => e as { status: number; message: string },
    );
  const stored = async (id: string | undefined) =>
    (await db().query('SELECT * FROM webhook_deliveries WHERE id = $1', [id])).rows[0];

  it('refuses a missing or empty raw body (400) before anything else', async () => {
    const body = v1Body(newWorkItem(), 'created');
    expect(await failure(intake.receive(request(body, { rawBody: undefined })))).toMatchObject({
      code: WebhooksErrorCode.NOT_JSON,
      message: expect.stringMatching(/JSON/),
    });
    expect(
      await failure(intake.receive(request(body, { rawBody: Buffer.alloc(0), signature: sign('') }))),
    ).toMatchObject({
      code: WebhooksErrorCode.NOT_JSON,
    });
  });

  it('keeps the sender’s delivery id for the record: the first of several, at most 200 characters', async () => {
    const one = await intake.receive(request(v1Body(newWorkItem(), 'created'), { deliveryHeader: 'd-1' }));
    expect((await stored(one.body.deliveryId)).external_delivery_id).toBe('d-1');
    const many = await intake.receive(
      request(v1Body(newWorkItem(), 'created'), { deliveryHeader: ['d-first', 'd-second'] }),
    );
    expect((await stored(many.body.deliveryId)).external_delivery_id).toBe('d-first');
    const long = await intake.receive(request(v1Body(newWorkItem(), 'created'), { deliveryHeader: 'x'.repeat(300) }));
    expect((await stored(long.body.deliveryId)).external_delivery_id).toBe('x'.repeat(200));
    const none = await intake.receive(request(v1Body(newWorkItem(), 'created'), { deliveryHeader: '' }));
    expect((await stored(none.body.deliveryId)).external_delivery_id).toBeNull();
  });

  it('records what it parsed, and answers accepted, duplicate (with the reason) or ignored (with the reason)', async () => {
    const item = newWorkItem();
    const created = await intake.receive(request(v1Body(item, 'created')));
    expect(created).toEqual({ httpStatus: 202, body: { status: 'accepted', deliveryId: expect.any(String) } });
    expect(await stored(created.body.deliveryId)).toMatchObject({
      provider: 'plane',
      payload_version: 'v1',
      event: 'issue',
      action: 'created',
      work_item_id: item.id,
      status: 'processed',
    });
    const { rows: projects } = await db().query(
      'SELECT p.name FROM projects p JOIN tasks t ON t.project_id = p.id WHERE t.external_id = $1',
      [item.id],
    );
    expect(projects[0].name).toMatch(new RegExp(`^Plane ${item.project}`));
    const update = await intake.receive(request(v1Body(item, 'updated', { field: 'name' })));
    expect(update).toEqual({
      httpStatus: 200,
      body: { status: 'duplicate', deliveryId: expect.any(String), reason: 'task_exists' },
    });
    const retry = await intake.receive(request(v1Body(item, 'created')));
    expect(retry).toEqual({ httpStatus: 200, body: { status: 'duplicate', deliveryId: created.body.deliveryId } });
    const ignored = await intake.receive(request(v1Body(newWorkItem(), 'restored')));
    expect(ignored).toEqual({
      httpStatus: 202,
      body: { status: 'ignored', deliveryId: expect.any(String), reason: 'action_not_handled' },
    });
  });

  it('replays only Plane deliveries that exist', async () => {
    await expect(intake.replay(randomUUID())).rejects.toMatchObject({ code: WebhooksErrorCode.DELIVERY_NOT_FOUND });
    const { rows } = await db().query(
      `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, payload) VALUES ('github', $1, 'v1', 'push', '{}') RETURNING id`,
      [randomUUID()],
    );
    expect(await failure(intake.replay(rows[0].id))).toMatchObject({
      code: WebhooksErrorCode.REPLAY_UNSUPPORTED,
      message: 'no replay for provider github',
    });
  });

  describe('WebhookDeliveriesRepository.record: one statement, insert or bump', () => {
    const delivery = (): NewDelivery => ({
      provider: 'plane',
      dedupeKey: `test:${randomUUID()}`,
      externalDeliveryId: null,
      payloadVersion: 'v1',
      event: 'issue',
      action: 'created',
      workItemId: randomUUID(),
      actorId: null,
      payload: { n: 1 },
    });

    it('twelve concurrent records of one key: one new, eleven duplicates counted, nothing taken over', async () => {
      const repo = t.app.get(WebhookDeliveriesRepository);
      const d = delivery();
      const results = await Promise.all(Array.from({ length: 12 }, () => repo.record(d)));
      const fresh = results.filter((r) => r.kind === 'new');
      expect(fresh).toHaveLength(1);
      for (const r of results) expect(r.id).toBe(fresh[0].id);
      expect(results.filter((r) => r.kind === 'duplicate' && !r.takeOver)).toHaveLength(11);
      expect(await stored(fresh[0].id)).toMatchObject({ duplicate_count: 11, status: 'accepted', payload: { n: 1 } });
    });

    it('recordOutcome(): in the caller’s transaction when given one (rolled back with it), else on its own; a processed delivery stays processed', async () => {
      const repo = t.app.get(WebhookDeliveriesRepository);
      const ds = t.app.get<DataSource>(getDataSourceToken());
      const { id } = await repo.record(delivery());
      await expect(
        ds.transaction(async (em) => {
          await repo.recordOutcome(id, { status: DeliveryStatus.PROCESSED, reason: 'task_created' }, em);
          throw new Error('task transaction rolled back');
        }),
      ).rejects.toThrow('task transaction rolled back');
      expect(await stored(id)).toMatchObject({
        status: 'accepted',
        reason: null,
        process_attempts: 0,
        processed_at: null,
      });
      await repo.recordOutcome(id, { status: DeliveryStatus.PROCESSED, reason: 'task_created' });
      expect(await stored(id)).toMatchObject({ status: 'processed', reason: 'task_created', process_attempts: 1 });
      // A replay finding the task: still processed, by the first pass.
      await repo.recordOutcome(id, { status: DeliveryStatus.DUPLICATE, reason: 'task_exists' });
      expect(await stored(id)).toMatchObject({ status: 'processed', reason: 'task_created', process_attempts: 2 });
      await repo.recordOutcome(id, { status: DeliveryStatus.FAILED, reason: 'processing_failed', error: 'boom' });
      expect(await stored(id)).toMatchObject({
        status: 'failed',
        reason: 'processing_failed',
        error: 'boom',
        process_attempts: 3,
      });
    });

    it('takeOver(): exactly once per stale accepted delivery (the retries that also saw it stale lose)', async () => {
      const repo = t.app.get(WebhookDeliveriesRepository);
      const takeOver = (id: string) => (repo as unknown as { takeOver(id: string): Promise<boolean> }).takeOver(id);
      const { id } = await repo.record(delivery());
      expect(await takeOver(id)).toBe(false); // fresh
      await db().query(`UPDATE webhook_deliveries SET updated_at = now() - interval '10 minutes' WHERE id = $1`, [id]);
      expect(await takeOver(id)).toBe(true);
      expect(await takeOver(id)).toBe(false);
      await db().query(
        `UPDATE webhook_deliveries SET status = 'failed', updated_at = now() - interval '10 minutes' WHERE id = $1`,
        [id],
      );
      expect(await takeOver(id)).toBe(false);
    });

    it('list(): newest received first (id breaks a tie), by provider and/or status, up to the limit', async () => {
      const repo = t.app.get(WebhookDeliveriesRepository);
      const provider = `test-${randomUUID()}`;
      const add = async (status: DeliveryStatus, at: string): Promise<string> =>
        (
          await db().query(
            `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, payload, status, received_at)
             VALUES ($1, $2, 'v1', 'push', '{}', $3, $4::timestamptz) RETURNING id`,
            [provider, randomUUID(), status, at],
          )
        ).rows[0].id;
      const ids = (rows: Array<{ id: string }>) => rows.map((r) => r.id);
      try {
        // Received long ago: every other row of the database is newer.
        const a = await add(DeliveryStatus.FAILED, '2000-01-01T00:00:03Z');
        const b = await add(DeliveryStatus.PROCESSED, '2000-01-01T00:00:02Z');
        const tied = [
          await add(DeliveryStatus.FAILED, '2000-01-01T00:00:01Z'),
          await add(DeliveryStatus.FAILED, '2000-01-01T00:00:01Z'),
        ]
          .sort()
          .reverse();
        expect(ids(await repo.list({ provider, limit: 10 }))).toEqual([a, b, ...tied]);
        expect(ids(await repo.list({ provider, status: DeliveryStatus.FAILED, limit: 10 }))).toEqual([a, ...tied]);
        expect(ids(await repo.list({ provider, limit: 2 }))).toEqual([a, b]);
        // Received in the future: the newest of the database, with or without a status filter.
        const e = await add(DeliveryStatus.FAILED, '2100-01-01T00:00:00Z');
        expect(ids(await repo.list({ limit: 1 }))).toEqual([e]);
        expect(ids(await repo.list({ status: DeliveryStatus.FAILED, limit: 1 }))).toEqual([e]);
        expect(ids(await repo.list({ status: DeliveryStatus.PROCESSED, limit: 50 }))).not.toContain(e);
      } finally {
        await db().query('DELETE FROM webhook_deliveries WHERE provider = $1', [provider]);
      }
    });

    it('a stale accepted delivery is taken over by exactly one of several concurrent retries', async () => {
      const repo = t.app.get(WebhookDeliveriesRepository);
      const d = delivery();
      const first = await repo.record(d);
      await db().query(`UPDATE webhook_deliveries SET updated_at = now() - interval '10 minutes' WHERE id = $1`, [
        first.id,
      ]);
      // record() only records: nobody processes in between, so every retry sees the row stale.
      const retries = await Promise.all(Array.from({ length: 6 }, () => repo.record(d)));
      expect(retries.filter((r) => r.kind === 'duplicate' && r.takeOver)).toHaveLength(1);
      const row = await stored(first.id);
      expect(row.duplicate_count).toBe(6);
      expect(Date.now() - new Date(row.updated_at).getTime()).toBeLessThan(30_000);
      // Neither a processed delivery nor a freshly touched accepted one is ever taken over.
      expect(await repo.record(d)).toMatchObject({ kind: 'duplicate', takeOver: false });
      await db().query(
        `UPDATE webhook_deliveries SET status = 'processed', updated_at = now() - interval '10 minutes' WHERE id = $1`,
        [first.id],
      );
      expect(await repo.record(d)).toMatchObject({ kind: 'duplicate', status: 'processed', takeOver: false });
    });
  });
});
