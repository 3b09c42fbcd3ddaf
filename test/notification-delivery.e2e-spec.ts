import { Agent } from 'node:http';
import { join } from 'node:path';
import { NotificationClaimsRepository } from '../src/notifications/notification-claims.repository';
import { NotificationDeliveryService } from '../src/notifications/notification-delivery.service';
import { pendingOutboxRow } from './support/outbox-rows';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';
import { SlackStub } from './support/slack-stub';

const LEASE_MS = 1500;
const MAX_ATTEMPTS = 3;
const BASE_DELAY_MS = 400;

/** Blocks this process's only thread, as SIGSTOP or a long GC pause would: no timer, no I/O runs. */
function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * NotificationDeliveryService.deliver called directly (no kick, no jobs, the scheduler's interval an
 * hour), each test racing exactly what it names: a lock lost before or during the claim, a POST
 * aborted, a process frozen before its POST was written, a database blip while "SENT" is recorded,
 * the attempts running out. The stub is the
 * outside witness of what Slack got; notifications-claims.e2e covers the claim races.
 */
describe('NotificationDeliveryService: one attempt, each way it can end', () => {
  const countFile = join(tempDir('notify-delivery'), 'executions.log');
  let stub: SlackStub;
  let t: TestApp;
  let delivery: NotificationDeliveryService;
  let claims: NotificationClaimsRepository;

  beforeAll(async () => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv('notify-delivery', countFile, {
        SLACK_WEBHOOK_URL: stub.url,
        RUN_LOCK_TTL_MS: String(LEASE_MS),
        RECONCILE_INTERVAL_MS: '3600000',
        NOTIFY_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
        NOTIFY_RETRY_BASE_DELAY_MS: String(BASE_DELAY_MS),
      }),
    );
    delivery = t.app.get(NotificationDeliveryService);
    claims = t.app.get(NotificationClaimsRepository);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(async () => {
    await db().query(
      `UPDATE notification_logs SET status = 'SENT' WHERE message->>'text' LIKE 'delivery test %' AND status = 'PENDING'`,
    );
    await t.close();
    await stub.close();
    await closeDb();
  });

  const pendingRow = () => pendingOutboxRow(t.app, 'run.failed', 'delivery test');
  const row = async (id: string) =>
    (
      await db().query(
        'SELECT status, attempts, last_error, claimed_until, next_attempt_at > now() AS later FROM notification_logs WHERE id = $1',
        [id],
      )
    ).rows[0];

  it('the lease of the claim is the run lock TTL', () => {
    expect(delivery.leaseMs).toBe(LEASE_MS);
  });

  it('claims nothing and posts nothing when the lock was lost before the claim', async () => {
    const r = await pendingRow();
    const lock = new AbortController();
    lock.abort(new Error('lock lost'));
    expect(await delivery.deliver(r.id, lock.signal)).toEqual({
      kind: 'later',
      delayMs: LEASE_MS + 100,
      reason: 'lock lost before the claim',
    });
    expect(await row(r.id)).toMatchObject({ status: 'PENDING', attempts: 0, claimed_until: null });
    expect(stub.for(r.runId)).toHaveLength(0);
  });

  it('posts nothing when the lock is lost while the claim is being written', async () => {
    const r = await pendingRow();
    const lock = new AbortController();
    const real = claims.claim.bind(claims);
    jest.spyOn(claims, 'claim').mockImplementation(async (...args) => {
      const claimed = await real(...args);
      lock.abort(new Error('lock lost'));
      return claimed;
    });
    expect(await delivery.deliver(r.id, lock.signal)).toEqual({
      kind: 'later',
      delayMs: LEASE_MS + 100,
      reason: 'claim or lock lost before the POST',
    });
    expect(stub.for(r.runId)).toHaveLength(0);
    // The claim's heartbeat was stopped: the claim lapses after one lease, nobody extends it.
    const claimedUntil = (await row(r.id)).claimed_until as Date;
    await new Promise((res) => setTimeout(res, LEASE_MS + 300));
    expect(((await row(r.id)).claimed_until as Date).getTime()).toBe(claimedUntil.getTime());
  });

  it('a POST dropped once the claim is lost is a wait of one lease, and records nothing', async () => {
    const r = await pendingRow();
    stub.plan(r.runId, { hold: true });
    const first = delivery.deliver(r.id);
    await waitFor(() => stub.held(r.runId).length === 1, 10_000, 'the POST');
    await db().query(
      `UPDATE notification_logs SET attempts = attempts + 1, claimed_until = now() + interval '1 minute' WHERE id = $1`,
      [r.id],
    );
    expect(await first).toEqual({ kind: 'later', delayMs: LEASE_MS + 100, reason: 'claim or lock lost while posting' });
    expect(await row(r.id)).toMatchObject({ status: 'PENDING', attempts: 2, last_error: null });
  });

  it('a transient failure with attempts left is retried after the backoff, with the error kept', async () => {
    const r = await pendingRow();
    stub.plan(r.runId, { status: 503 });
    const result = await delivery.deliver(r.id);
    expect(result).toMatchObject({ kind: 'retry' });
    const { delayMs, error } = result as { delayMs: number; error: string };
    // Attempt 1 of base 400 ms: equal jitter between 200 and 400 ms.
    expect(delayMs).toBeGreaterThanOrEqual(BASE_DELAY_MS / 2);
    expect(delayMs).toBeLessThanOrEqual(BASE_DELAY_MS);
    expect(error).toMatch(/503/);
    expect(await row(r.id)).toMatchObject({
      status: 'PENDING',
      attempts: 1,
      last_error: error,
      claimed_until: null,
      later: true,
    });
  });

  it('a transient failure of the last attempt is FAILED for good', async () => {
    const r = await pendingRow();
    await db().query(`UPDATE notification_logs SET attempts = $2 WHERE id = $1`, [r.id, MAX_ATTEMPTS - 1]);
    stub.plan(r.runId, { status: 503 });
    const result = await delivery.deliver(r.id);
    expect(result).toMatchObject({ kind: 'failed' });
    expect((result as { error: string }).error).toMatch(/503/);
    expect(await row(r.id)).toMatchObject({ status: 'FAILED', attempts: MAX_ATTEMPTS });
  });

  it('keeps recording "SENT" through a database blip after Slack’s 200: one message', async () => {
    const r = await pendingRow();
    const real = claims.markSent.bind(claims);
    const tries: number[] = [];
    jest.spyOn(claims, 'markSent').mockImplementation(async (id) => {
      tries.push(Date.now());
      if (tries.length <= 2)
        throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      return real(id);
    });
    expect(await delivery.deliver(r.id)).toEqual({ kind: 'sent', attempts: 1 });
    expect(tries).toHaveLength(3);
    // 50 ms, then 100 ms between the tries: doubling from 50, not waiting seconds at once.
    const [gap1, gap2] = [tries[1] - tries[0], tries[2] - tries[1]];
    expect(gap1).toBeGreaterThanOrEqual(45);
    expect(gap2).toBeGreaterThanOrEqual(95);
    expect(gap1 + gap2).toBeLessThan(1500);
    expect(await row(r.id)).toMatchObject({ status: 'SENT' });
    expect(stub.delivered(r.runId)).toBe(1);
  });

  it('does not retry recording "SENT" after an error that is not the database going away', async () => {
    const r = await pendingRow();
    const boom = Object.assign(new Error('value too long'), { code: '22001' });
    const spy = jest.spyOn(claims, 'markSent').mockRejectedValue(boom);
    await expect(delivery.deliver(r.id)).rejects.toBe(boom);
    expect(spy).toHaveBeenCalledTimes(1);
  });

  // The POST is written only while the claim surely holds (docs/notifications.md, window 3): an
  // attempt that froze after its claim and woke past that point sends nothing. The freezes are real.
  const unwritten = { kind: 'later', delayMs: LEASE_MS + 100, reason: 'claim could lapse before the POST was written' };
  /** Slack got nothing from the frozen attempt; once the lease lapsed, the next attempt posts the message once. */
  async function nothingThenOnce(id: string, runId: string): Promise<void> {
    await new Promise((res) => setTimeout(res, 300));
    expect(stub.for(runId)).toHaveLength(0);
    await new Promise((res) => setTimeout(res, LEASE_MS + 200));
    expect(await delivery.deliver(id)).toEqual({ kind: 'sent', attempts: 2 });
    expect(stub.for(runId)).toHaveLength(1);
    expect(stub.delivered(runId)).toBe(1);
  }

  it('frozen while its connection was being opened: woken connected but past the deadline, it writes nothing', async () => {
    const r = await pendingRow();
    // Each POST opens its connection: the process freezes as this one connects.
    const real = Agent.prototype.createConnection;
    const opened = jest.spyOn(Agent.prototype, 'createConnection').mockImplementation(function (
      this: Agent,
      ...args: Parameters<Agent['createConnection']>
    ) {
      const socket = real.apply(this, args);
      // Before anything queued for the socket is written.
      socket?.prependOnceListener('connect', () => freeze(LEASE_MS + 200));
      return socket;
    });
    expect(await delivery.deliver(r.id)).toEqual(unwritten);
    expect(opened).toHaveBeenCalledTimes(1);
    opened.mockRestore();
    await nothingThenOnce(r.id, r.runId);
  });

  it('frozen between the claim and the POST: counted from when the claim was asked for, it writes nothing', async () => {
    const r = await pendingRow();
    const real = claims.claim.bind(claims);
    jest.spyOn(claims, 'claim').mockImplementation(async (...args) => {
      const claimed = await real(...args);
      freeze(LEASE_MS + 200);
      return claimed;
    });
    expect(await delivery.deliver(r.id)).toEqual(unwritten);
    jest.restoreAllMocks();
    await nothingThenOnce(r.id, r.runId);
  });

  it('a 200 for a row another deliverer already recorded is still "sent" (Slack has the message)', async () => {
    const r = await pendingRow();
    stub.plan(r.runId, { hold: true });
    const first = delivery.deliver(r.id);
    await waitFor(() => stub.held(r.runId).length === 1, 10_000, 'the POST');
    await db().query(`UPDATE notification_logs SET status = 'SENT', sent_at = now() WHERE id = $1`, [r.id]);
    stub.held(r.runId)[0].release({ status: 200 });
    expect(await first).toEqual({ kind: 'sent', attempts: 1 });
  });
});
