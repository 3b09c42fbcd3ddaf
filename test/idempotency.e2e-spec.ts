import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { DomainError } from '../src/common/domain-error';
import { IdempotencyErrorCode } from '../src/runs/idempotency/idempotency.errors';
import { IdempotencyService } from '../src/runs/idempotency/idempotency.service';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';

/** IdempotencyService on its own, against Postgres: who does the work, who waits, who is replayed. */
describe('IdempotencyService', () => {
  const countFile = join(tempDir('idem'), 'executions.log');
  let t: TestApp;
  let idem: IdempotencyService;

  beforeAll(async () => {
    t = await startApp(testEnv('idem', countFile, { APP_ROLE: 'api', IDEMPOTENCY_KEY_TTL_MS: '60000' }));
    idem = t.app.get(IdempotencyService);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const keyRow = async (key: string) =>
    (await db().query('SELECT *, expires_at - created_at AS ttl FROM idempotency_keys WHERE key = $1', [key])).rows[0];
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: unknown) => e as DomainError,
    );

  it('does the work once, stores the answer with the key’s TTL, then replays it', async () => {
    const key = randomUUID();
    let calls = 0;
    const work = async () => ({ status: 201, body: { id: `n${++calls}` }, after: 'side effect' });
    expect(await idem.execute(key, 'print-a', work)).toEqual({
      status: 201,
      body: { id: 'n1' },
      replayed: false,
      after: 'side effect',
    });
    expect(await keyRow(key)).toMatchObject({
      fingerprint: 'print-a',
      state: 'completed',
      response_status: 201,
      response_body: { id: 'n1' },
    });
    expect((await keyRow(key)).ttl).toMatchObject({ minutes: 1 });
    expect(await idem.execute(key, 'print-a', work)).toEqual({ status: 201, body: { id: 'n1' }, replayed: true });
    expect(calls).toBe(1);
  });

  it('refuses the key with another request (422), and while the first is in flight (409, Retry-After)', async () => {
    const key = randomUUID();
    await idem.execute(key, 'print-a', async () => ({ status: 201, body: {} }));
    expect(await failure(idem.execute(key, 'print-b', async () => ({ status: 201, body: {} })))).toMatchObject({
      code: IdempotencyErrorCode.KEY_REUSED,
    });

    const inFlight = randomUUID();
    let release!: () => void;
    const first = idem.execute(
      inFlight,
      'print-a',
      () => new Promise((r) => (release = () => r({ status: 201, body: { ok: 1 } }))),
    );
    await waitFor(async () => (await keyRow(inFlight))?.state === 'in_flight', 3000, 'the key to be claimed');
    const busy = await failure(idem.execute(inFlight, 'print-a', async () => ({ status: 201, body: {} })));
    expect(busy).toMatchObject({
      code: IdempotencyErrorCode.IN_FLIGHT,
      message: expect.stringMatching(/still in flight/),
    });
    expect(busy!.headers).toEqual({ 'Retry-After': '1' });
    expect(await failure(idem.execute(inFlight, 'print-b', async () => ({ status: 201, body: {} })))).toMatchObject({
      code: IdempotencyErrorCode.KEY_REUSED,
    });
    release();
    await expect(first).resolves.toMatchObject({ status: 201, replayed: false });
  });

  it('frees the key when the work fails, so the retry does the work', async () => {
    const key = randomUUID();
    await expect(idem.execute(key, 'p', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await keyRow(key)).toBeUndefined();
    expect(await idem.execute(key, 'p', async () => ({ status: 201, body: { again: true } }))).toMatchObject({
      replayed: false,
      body: { again: true },
    });
  });

  it.each([
    ['an expired answer', `'completed', 200, '{"old":true}', now() - interval '1 hour', now() - interval '1 second'`],
    [
      'a claim abandoned for over five minutes',
      `'in_flight', NULL, NULL, now() - interval '6 minutes', now() + interval '1 hour'`,
    ],
  ])('takes over %s and does the work', async (_name, values) => {
    const key = randomUUID();
    await db().query(
      `INSERT INTO idempotency_keys (key, fingerprint, state, response_status, response_body, created_at, expires_at) VALUES ($1, 'old-print', ${values})`,
      [key],
    );
    const answer = await idem.execute(key, 'new-print', async () => ({ status: 201, body: { fresh: true } }));
    expect(answer).toMatchObject({ replayed: false, body: { fresh: true } });
    expect(await keyRow(key)).toMatchObject({ fingerprint: 'new-print', state: 'completed' });
  });

  it('a claim in flight for four minutes is still respected', async () => {
    const key = randomUUID();
    await db().query(
      `INSERT INTO idempotency_keys (key, fingerprint, state, created_at, expires_at) VALUES ($1, 'p', 'in_flight', now() - interval '4 minutes', now() + interval '1 hour')`,
      [key],
    );
    expect(await failure(idem.execute(key, 'p', async () => ({ status: 201, body: {} })))).toMatchObject({
      code: IdempotencyErrorCode.IN_FLIGHT,
    });
  });
});
