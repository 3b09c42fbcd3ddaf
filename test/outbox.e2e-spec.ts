import { bindNamed, mergeValues } from '../src/database/named-params';
import { getDataSourceToken } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { ClaimedNotification, NotificationClaimsRepository } from '../src/notifications/notification-claims.repository';
import type { MetricsService } from '../src/metrics/metrics.service';
import { OutboxWriter } from '../src/notifications/outbox.writer';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';

/**
 * The outbox row's life, statement by statement, on rows each test prepares. Worker role (the
 * claims live there) but nothing is ever kicked or swept, so no deliverer touches these rows.
 */
describe('outbox writer and notification claims', () => {
  const countFile = join(tempDir('outbox'), 'executions.log');
  let t: TestApp;
  let ds: DataSource;
  let claims: NotificationClaimsRepository;

  beforeAll(async () => {
    t = await startApp(testEnv('outbox', countFile, { APP_ROLE: 'worker' }));
    ds = t.app.get(getDataSourceToken());
    claims = t.app.get(NotificationClaimsRepository);
  });
  afterAll(async () => {
    // Other files' sweepers share this database (one per jest run): leave no row of ours behind
    // for them to fail or re-deliver.
    await db().query('DELETE FROM notification_logs WHERE run_id = ANY($1::uuid[])', [runIds]);
    await t.close();
    await closeDb();
  });

  const runIds: string[] = [];
  const newRun = () => {
    const id = randomUUID();
    runIds.push(id);
    return id;
  };

  const row = async (id: string) =>
    (
      await db().query(
        `SELECT *, EXTRACT(EPOCH FROM (claimed_until - now())) * 1000 AS claim_ms, EXTRACT(EPOCH FROM (next_attempt_at - now())) * 1000 AS due_ms
           FROM notification_logs WHERE id = $1`,
        [id],
      )
    ).rows[0];
  /** A row as the writer and earlier attempts left it; times are ms from now. */
  async function insert(
    s: { status?: string; attempts?: number; dueMs?: number; claimMs?: number | null } = {},
  ): Promise<string> {
    const { rows } = await db().query(
      `INSERT INTO notification_logs (run_id, event_type, channel, status, message, attempts, next_attempt_at, claimed_until)
       VALUES ($1, 'run.succeeded', 'slack', $2, '{"text":"hi"}', $3, now() + $4::int * interval '1 millisecond',
               CASE WHEN $5::int IS NULL THEN NULL ELSE now() + $5::int * interval '1 millisecond' END)
       RETURNING id`,
      [newRun(), s.status ?? 'PENDING', s.attempts ?? 0, s.dueMs ?? -1000, s.claimMs ?? null],
    );
    return rows[0].id;
  }

  it('writes PENDING rows with the message, once per run, event and channel', async () => {
    const writer = new OutboxWriter({ slackConfigured: true });
    const runId = newRun();
    const add = (eventType: 'run.succeeded' | 'run.failed', text: string, channel?: 'slack') =>
      ds.transaction((em) => writer.add(em, { runId, eventType, text, blocks: [{ type: 'section' }] }, channel));
    const id = await add('run.succeeded', 'first');
    expect(await add('run.succeeded', 'second')).toBeNull();
    expect(await row(id!)).toMatchObject({
      run_id: runId,
      event_type: 'run.succeeded',
      channel: 'slack',
      status: 'PENDING',
      last_error: null,
      message: { text: 'first', blocks: [{ type: 'section' }] },
    });
    const other = await add('run.failed', 'failed');
    expect(other).not.toBeNull();
    expect(other).not.toBe(id);
  });

  it('writes SKIPPED with the reason when Slack is not configured; a rolled-back caller leaves nothing', async () => {
    const writer = new OutboxWriter({ slackConfigured: false });
    const runId = newRun();
    const id = await ds.transaction((em) => writer.add(em, { runId, eventType: 'run.failed', text: 'x' }));
    expect(await row(id!)).toMatchObject({ status: 'SKIPPED', last_error: 'SLACK_WEBHOOK_URL is not set' });
    const lost = newRun();
    await expect(
      ds.transaction(async (em) => {
        await writer.add(em, { runId: lost, eventType: 'run.failed', text: 'x' });
        throw new Error('finalize rolled back');
      }),
    ).rejects.toThrow('finalize rolled back');
    expect(
      (await db().query('SELECT count(*)::int AS n FROM notification_logs WHERE run_id = $1', [lost])).rows[0].n,
    ).toBe(0);
  });

  it('cte(): the row as a CTE of the caller’s statement (named values), only when the source yields the run, once', async () => {
    const runId = newRun();
    const finalize = async (writer: OutboxWriter, present: boolean, id = runId): Promise<string | null> => {
      const cte = writer.cte({ eventType: 'run.failed', text: 'boom', blocks: [{ type: 'section' }] }, 'upd');
      const { text, values } = bindNamed(
        `WITH upd AS (SELECT :id::uuid AS id WHERE :present::boolean), ${cte.text} SELECT (SELECT id FROM outbox) AS notification_id`,
        mergeValues({ id, present }, cte.values),
      );
      const { rows } = await db().query(text, values);
      return rows[0].notification_id;
    };
    const count = async (id: string) =>
      (await db().query('SELECT count(*)::int AS n FROM notification_logs WHERE run_id = $1', [id])).rows[0].n;
    const pending = new OutboxWriter({ slackConfigured: true });
    // The transition did not happen: no row.
    expect(await finalize(pending, false)).toBeNull();
    expect(await count(runId)).toBe(0);
    const id = await finalize(pending, true);
    expect(id).not.toBeNull();
    expect(await row(id!)).toMatchObject({
      run_id: runId,
      event_type: 'run.failed',
      channel: 'slack',
      status: 'PENDING',
      last_error: null,
      message: { text: 'boom', blocks: [{ type: 'section' }] },
    });
    // A second finalize statement for the same run and event: nothing more, and no id back.
    expect(await finalize(pending, true)).toBeNull();
    expect(await count(runId)).toBe(1);
    // Without Slack: SKIPPED, with the reason.
    const other = newRun();
    const skipped = await finalize(new OutboxWriter({ slackConfigured: false }), true, other);
    expect(await row(skipped!)).toMatchObject({
      run_id: other,
      status: 'SKIPPED',
      last_error: 'SLACK_WEBHOOK_URL is not set',
    });
  });

  it('written(): counts a SKIPPED row that was written, nothing else; add() reports its row', async () => {
    const inc = jest.fn();
    const metrics = { notifications: { inc } } as unknown as MetricsService;
    const unconfigured = new OutboxWriter({ slackConfigured: false }, metrics);
    unconfigured.written(null);
    expect(inc).not.toHaveBeenCalled();
    unconfigured.written(randomUUID());
    expect(inc).toHaveBeenCalledTimes(1);
    expect(inc).toHaveBeenCalledWith({ outcome: 'skipped' });
    new OutboxWriter({ slackConfigured: true }, metrics).written(randomUUID());
    expect(inc).toHaveBeenCalledTimes(1);
    const runId = newRun();
    const add = () => ds.transaction((em) => unconfigured.add(em, { runId, eventType: 'run.failed', text: 'x' }));
    expect(await add()).not.toBeNull();
    expect(inc).toHaveBeenCalledTimes(2);
    // The duplicate adds nothing and counts nothing.
    expect(await add()).toBeNull();
    expect(inc).toHaveBeenCalledTimes(2);
  });

  it('claim(): a due, free PENDING row with attempts left, counting the attempt and holding it for the lease', async () => {
    const id = await insert({ attempts: 1 });
    const claim = await claims.claim(id, 2000, 5);
    expect(claim).toMatchObject({ id, attempts: 2, message: { text: 'hi' } });
    expect(claim!.runId).toBe((await row(id)).run_id);
    const held = await row(id);
    expect(Number(held.claim_ms)).toBeGreaterThan(1500);
    expect(Number(held.claim_ms)).toBeLessThanOrEqual(2000);
    expect(await claims.claim(id, 2000, 5)).toBeNull();
    const lapsed = await insert({ attempts: 1, claimMs: -10 });
    expect((await claims.claim(lapsed, 2000, 5))?.attempts).toBe(2);
  });

  it.each<[string, { status?: string; attempts?: number; dueMs?: number }]>([
    ['not due yet', { dueMs: 5000 }],
    ['out of attempts', { attempts: 5 }],
    ['SENT', { status: 'SENT' }],
    ['FAILED', { status: 'FAILED' }],
    ['SKIPPED', { status: 'SKIPPED' }],
  ])('claim() refuses a row %s', async (_name, state) => {
    const id = await insert(state);
    expect(await claims.claim(id, 2000, 5)).toBeNull();
    expect(await row(id)).toMatchObject({ attempts: state.attempts ?? 0, claimed_until: null });
  });

  it('whyNot(): gone or wait, with the delay to wait', async () => {
    expect(await claims.whyNot(randomUUID(), 5)).toEqual({ kind: 'skip', reason: 'no such notification' });
    expect(await claims.whyNot(await insert({ status: 'SENT' }), 5)).toEqual({ kind: 'skip', reason: 'already SENT' });
    const held = await claims.whyNot(await insert({ attempts: 5, claimMs: 3000 }), 5);
    expect(held).toMatchObject({ kind: 'later', reason: 'claimed by another deliverer' });
    expect((held as { delayMs: number }).delayMs).toBeGreaterThan(2800 + 100);
    expect((held as { delayMs: number }).delayMs).toBeLessThanOrEqual(3000 + 101);
    expect(await claims.whyNot(await insert({ attempts: 5, claimMs: -10 }), 5)).toEqual({
      kind: 'skip',
      reason: 'out of attempts (the sweeper fails it)',
    });
    const later = await claims.whyNot(await insert({ attempts: 4, dueMs: 3000 }), 5);
    expect(later).toMatchObject({ kind: 'later', reason: 'next attempt not due yet' });
    expect((later as { delayMs: number }).delayMs).toBeGreaterThan(2800 + 20);
    expect((later as { delayMs: number }).delayMs).toBeLessThanOrEqual(3000 + 21);
    expect(await claims.whyNot(await insert({ attempts: 4, dueMs: -5000 }), 5)).toMatchObject({
      kind: 'later',
      delayMs: 20,
    });
    // The wait ends 20 ms AFTER the attempt is due (never before it): at least the time left
    // when read after whyNot() (time only shrinks it), plus the margin.
    const due = await insert({ attempts: 4, dueMs: 3000 });
    const wait = (await claims.whyNot(due, 5)) as { delayMs: number };
    expect(wait.delayMs).toBeGreaterThanOrEqual(Number((await row(due)).due_ms) + 20);
  });

  it('extend, markRetry and markFailed are fenced by the attempt; markSent is not', async () => {
    const id = await insert({ attempts: 0 });
    const mine = (await claims.claim(id, 1000, 5))!;
    const stale: ClaimedNotification = { ...mine, attempts: mine.attempts - 1 };
    expect(await claims.extend(stale, 5000)).toBe(false);
    expect(await claims.extend(mine, 5000)).toBe(true);
    expect(Number((await row(id)).claim_ms)).toBeGreaterThan(4000);
    expect(await claims.markRetry(stale, 3000, 'old')).toBe(false);
    expect(await claims.markFailed(stale, 'old')).toBe(false);
    expect(await claims.markRetry(mine, 3000, 'HTTP 500')).toBe(true);
    const retried = await row(id);
    expect(retried).toMatchObject({ status: 'PENDING', claimed_until: null, last_error: 'HTTP 500', attempts: 1 });
    expect(Number(retried.due_ms)).toBeGreaterThan(2500);

    const other = (await claims.claim(await insert(), 1000, 5))!;
    expect(await claims.markFailed(other, 'HTTP 400')).toBe(true);
    expect(await row(other.id)).toMatchObject({ status: 'FAILED', claimed_until: null, last_error: 'HTTP 400' });
    expect(await claims.extend(other, 1000)).toBe(false);
    // A late 200 for an attempt given up on is still the truth: SENT, error cleared.
    expect(await claims.markSent(other.id)).toBe(true);
    const sent = await row(other.id);
    expect(sent).toMatchObject({ status: 'SENT', last_error: null, claimed_until: null });
    expect(sent.sent_at).not.toBeNull();
    expect(await claims.markSent(other.id)).toBe(false);
    expect(await claims.markSent(await insert({ status: 'SKIPPED' }))).toBe(false);
  });

  it('lost() lists due, free rows with attempts left, oldest first, up to the limit', async () => {
    const old = await insert({ dueMs: -60_000 });
    const older = await insert({ dueMs: -120_000, attempts: 2 });
    const mine = [old, older];
    mine.push(await insert({ dueMs: -500 })); // inside the grace
    mine.push(await insert({ dueMs: -60_000, claimMs: 5000 })); // held
    mine.push(await insert({ dueMs: -60_000, attempts: 5 })); // out of attempts
    mine.push(await insert({ dueMs: -60_000, status: 'FAILED' }));
    // Other tests' rows may be lost too: look at ours only.
    expect((await claims.lost(10_000, 5, 10_000)).filter((r) => mine.includes(r.id))).toEqual([
      { id: older, attempts: 2 },
      { id: old, attempts: 0 },
    ]);
    expect(await claims.lost(10_000, 5, 1)).toHaveLength(1);
  });

  it('failExhausted() fails the free rows out of attempts, and only those', async () => {
    const dead = await insert({ attempts: 5, claimMs: -10 });
    const held = await insert({ attempts: 5, claimMs: 5000 });
    const left = await insert({ attempts: 4 });
    expect(await claims.failExhausted(5)).toBeGreaterThanOrEqual(1);
    expect(await row(dead)).toMatchObject({
      status: 'FAILED',
      claimed_until: null,
      last_error: expect.stringMatching(/interrupted/),
    });
    expect(await row(held)).toMatchObject({ status: 'PENDING' });
    expect(await row(left)).toMatchObject({ status: 'PENDING' });
  });
});
