import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { auth, closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';
import {
  BOT_ACTOR,
  deliver,
  newWorkItem,
  PLANE_SECRET,
  PLANE_SECRET_2,
  pythonJsonDumps,
  sign,
  v1Body,
  v2Body,
} from './support/plane';

/** Row totals: a rejected delivery must leave every one of them unchanged. */
async function totals(): Promise<Record<string, number>> {
  const { rows } = await db().query(
    `SELECT (SELECT count(*) FROM tasks)::int AS tasks, (SELECT count(*) FROM runs)::int AS runs,
            (SELECT count(*) FROM projects)::int AS projects, (SELECT count(*) FROM webhook_deliveries)::int AS deliveries`,
  );
  return rows[0];
}

async function tasksFor(workItemId: string): Promise<number> {
  const { rows } = await db().query(
    `SELECT count(*)::int AS n FROM tasks WHERE external_provider = 'plane' AND external_id = $1`,
    [workItemId],
  );
  return rows[0].n;
}

describe('Plane webhook guards', () => {
  const countFile = join(tempDir('wh-guards'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    // API role only: these tests are about what the front door lets in, not about executing runs.
    t = await startApp(
      testEnv('wh-guards', countFile, {
        APP_ROLE: 'api',
        PLANE_WEBHOOK_SECRETS: `${PLANE_SECRET}, ${PLANE_SECRET_2}`,
        PLANE_BOT_ACTOR_IDS: BOT_ACTOR,
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('builds bodies byte for byte as Python json.dumps does', () => {
    const value = { event: 'issue', data: { name: 'Zoë “q” — 😀', n: 42, l: [1, null, true], o: {} } };
    let python: string;
    try {
      python = execFileSync(
        'python3',
        ['-c', 'import json,sys; sys.stdout.write(json.dumps(json.loads(sys.stdin.read())))'],
        {
          input: JSON.stringify(value),
        },
      ).toString();
    } catch {
      python =
        '{"event": "issue", "data": {"name": "Zo\\u00eb \\u201cq\\u201d \\u2014 \\ud83d\\ude00", "n": 42, "l": [1, null, true], "o": {}}}';
    }
    expect(pythonJsonDumps(value)).toBe(python);
  });

  it('accepts a Plane-signed body, and the same JSON re-serialised by Node does not verify', async () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    const reserialised = JSON.stringify(JSON.parse(body));
    expect(reserialised).not.toBe(body);
    const before = await totals();
    const forged = await deliver(t, reserialised, { signature: sign(body) });
    expect(forged.status).toBe(401);
    expect(forged.body).toMatchObject({ statusCode: 401, error: 'Unauthorized' });
    expect(await totals()).toEqual(before);

    const real = await deliver(t, body);
    expect(real.status).toBe(202);
    expect(real.body).toMatchObject({ status: 'accepted', deliveryId: expect.any(String) });
    expect(await tasksFor(item.id)).toBe(1);
  });

  describe('bad input: the contract status and no row anywhere', () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    const good = sign(body);
    const cases: Array<[string, () => ReturnType<typeof deliver>, number]> = [
      ['missing signature', () => deliver(t, body, { signature: null }), 401],
      ['empty signature', () => deliver(t, body, { signature: '' }), 401],
      ['wrong signature', () => deliver(t, body, { signature: sign(body, 'plane_wh_not_the_secret') }), 401],
      ['short signature', () => deliver(t, body, { signature: good.slice(0, 40) }), 401],
      ['non-hex signature', () => deliver(t, body, { signature: 'g'.repeat(64) }), 401],
      ['sha256= prefixed signature', () => deliver(t, body, { signature: `sha256=${good}` }), 401],
      ['signature of another body', () => deliver(t, body, { signature: sign(v1Body(item, 'updated')) }), 401],
      ['truncated JSON', () => deliver(t, body.slice(0, body.length - 10)), 400],
      ['a JSON array', () => deliver(t, '[1, 2]'), 400],
      ['missing data.id', () => deliver(t, body.replace(`"id": "${item.id}", "name"`, '"name"')), 400],
      ['data.id "None"', () => deliver(t, body.replace(`"id": "${item.id}", "name"`, '"id": "None", "name"')), 400],
      ['a created item without project', () => deliver(t, body.replace(`"project": "${item.project}", `, '')), 400],
      [
        'v2 without event_id',
        () => deliver(t, v2Body(item, 'workitem.created').replace(/"event_id": "[^"]+", /, '')),
        400,
      ],
      [
        'a 2 MiB body',
        () =>
          deliver(
            t,
            pythonJsonDumps({
              event: 'issue',
              action: 'created',
              data: { id: item.id, pad: 'x'.repeat(2 * 1024 * 1024) },
            }),
          ),
        413,
      ],
    ];

    it.each(cases)('%s', async (_name, send, status) => {
      const before = await totals();
      const res = await send();
      expect(res.status).toBe(status);
      expect(res.body).toMatchObject({ statusCode: status, error: expect.any(String), message: expect.any(String) });
      expect(await totals()).toEqual(before);
      expect(await tasksFor(item.id)).toBe(0);
    });

    it('a missing body, or one not sent as JSON, is a 400', async () => {
      const before = await totals();
      const empty = await t.http.post('/webhooks/plane').set('X-Plane-Signature', sign(''));
      expect(empty.status).toBe(400);
      const text = await t.http
        .post('/webhooks/plane')
        .set('Content-Type', 'text/plain')
        .set('X-Plane-Signature', good)
        .send(body);
      expect(text.status).toBe(400);
      expect(await totals()).toEqual(before);
    });
  });

  it('accepts either configured secret (rotation)', async () => {
    const a = newWorkItem();
    const b = newWorkItem();
    expect((await deliver(t, v1Body(a, 'created'), { secret: PLANE_SECRET })).status).toBe(202);
    expect((await deliver(t, v1Body(b, 'created'), { secret: PLANE_SECRET_2 })).status).toBe(202);
    expect(await tasksFor(a.id)).toBe(1);
    expect(await tasksFor(b.id)).toBe(1);
  });

  it('ignores our own bot (v1 activity.actor, v2 updated_by_id): recorded, no task', async () => {
    const item = newWorkItem();
    const v1 = await deliver(t, v1Body(item, 'created', { actor: BOT_ACTOR }));
    expect(v1.status).toBe(202);
    expect(v1.body).toEqual({ status: 'ignored', reason: 'self_actor', deliveryId: expect.any(String) });
    const v2 = await deliver(t, v2Body(item, 'workitem.updated', { actor: BOT_ACTOR }));
    expect(v2.status).toBe(202);
    expect(v2.body).toMatchObject({ status: 'ignored', reason: 'self_actor' });
    expect(await tasksFor(item.id)).toBe(0);
    const { rows } = await db().query(
      'SELECT status, reason, actor_id FROM webhook_deliveries WHERE id = ANY($1) ORDER BY received_at',
      [[v1.body.deliveryId, v2.body.deliveryId]],
    );
    expect(rows).toEqual([
      { status: 'ignored', reason: 'self_actor', actor_id: BOT_ACTOR },
      { status: 'ignored', reason: 'self_actor', actor_id: BOT_ACTOR },
    ]);
    // The same item from a human still becomes a task: the guard is about the actor, not the item.
    expect((await deliver(t, v1Body(item, 'created'))).status).toBe(202);
    expect(await tasksFor(item.id)).toBe(1);
  });

  it('records and ignores events it does not act on', async () => {
    const item = newWorkItem();
    const body = pythonJsonDumps({
      event: 'cycle',
      action: 'created',
      webhook_id: 'w',
      workspace_id: item.workspace,
      data: { id: item.id, name: 'Sprint 1' },
      activity: {},
    });
    const res = await deliver(t, body, { event: 'cycle' });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'ignored', reason: 'event_not_handled' });
    const unknownDelete = await deliver(t, v1Body(newWorkItem(), 'deleted'));
    expect(unknownDelete.body).toMatchObject({ status: 'ignored', reason: 'unknown_work_item' });
    expect(await tasksFor(item.id)).toBe(0);
    const list = await t.http.get('/api/webhook-deliveries').query({ provider: 'plane', status: 'ignored' }).set(auth);
    expect(list.status).toBe(200);
    expect(list.body.items.map((d: { id: string }) => d.id)).toEqual(
      expect.arrayContaining([res.body.deliveryId, unknownDelete.body.deliveryId]),
    );
    expect(list.body.items.every((d: { status: string }) => d.status === 'ignored')).toBe(true);
  });

  it('needs a bearer token on /api/webhook-deliveries and /api/tasks, none on /webhooks/plane', async () => {
    expect((await t.http.get('/api/webhook-deliveries')).status).toBe(401);
    expect((await t.http.get('/api/tasks')).status).toBe(401);
    expect((await t.http.post('/api/webhook-deliveries/00000000-0000-4000-8000-000000000000/replay')).status).toBe(401);
    expect(
      (await t.http.post('/api/webhook-deliveries/00000000-0000-4000-8000-000000000000/replay').set(auth)).status,
    ).toBe(404);
    expect((await t.http.get('/api/webhook-deliveries').query({ status: 'bogus' }).set(auth)).status).toBe(400);
  });
});

describe('Plane webhook configuration', () => {
  const countFile = join(tempDir('wh-config'), 'executions.log');

  afterAll(closeDb);

  it('answers 503 when no secret is configured, and stores nothing', async () => {
    const t = await startApp(testEnv('wh-unconf', countFile, { APP_ROLE: 'api' }));
    try {
      const before = await totals();
      const res = await deliver(t, v1Body(newWorkItem(), 'created'));
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ statusCode: 503, message: expect.stringMatching(/not configured/) });
      expect(await totals()).toEqual(before);
    } finally {
      await t.close();
    }
  });

  it('refuses a secret once it is removed from the list', async () => {
    const t = await startApp(
      testEnv('wh-rotated', countFile, { APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET_2 }),
    );
    try {
      const item = newWorkItem();
      const before = await totals();
      expect((await deliver(t, v1Body(item, 'created'), { secret: PLANE_SECRET })).status).toBe(401);
      expect(await totals()).toEqual(before);
      expect((await deliver(t, v1Body(item, 'created'), { secret: PLANE_SECRET_2 })).status).toBe(202);
      expect(await tasksFor(item.id)).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('serves no webhook route in a worker-only process', async () => {
    // A queue of its own: this file's earlier runs are not its business (a job it took up would
    // still be in flight when the test closes it a moment later).
    const t = await startApp(
      testEnv('wh-worker', countFile, {
        APP_ROLE: 'worker',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
        REDIS_PREFIX: uniquePrefix('wh-worker'),
      }),
    );
    try {
      expect((await deliver(t, v1Body(newWorkItem(), 'created'))).status).toBe(404);
    } finally {
      await t.close();
    }
  });
});
