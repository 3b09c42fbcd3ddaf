import { getQueueToken } from '@nestjs/bull';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { Queue } from 'bull';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { MetricsService } from '../src/metrics/metrics.service';
import {
  DeliveryResult,
  NotificationDeliveryService,
  POST_ABORT_GRACE_MS,
} from '../src/notifications/notification-delivery.service';
import { NotificationKicker } from '../src/notifications/notification-kicker';
import { NotificationSweeper } from '../src/notifications/notification-sweeper';
import { OutboxWriter } from '../src/notifications/outbox.writer';
import { notificationJobId } from '../src/queues/job-ids';
import { NOTIFICATIONS_QUEUE } from '../src/queues/queue-names';
import { RunFinalizer } from '../src/runs/worker/run-finalizer';
import { RunStatus } from '../src/runs/run-status';
import { pendingOutboxRow } from './support/outbox-rows';
import { auth, blockEventLoop, closeDb, createProject, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';
import { SlackStub } from './support/slack-stub';

/**
 * The claim, attempt by attempt. Deliverers are called directly (no kick, no jobs, and the
 * scheduler's interval is an hour) so each test decides exactly who races whom; the stub counts.
 */
describe('notification claims', () => {
  const countFile = join(tempDir('notify-claims'), 'executions.log');
  let stub: SlackStub;
  let t: TestApp;
  let delivery: NotificationDeliveryService;
  const LEASE_MS = 1500;

  beforeAll(async () => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv('notify-claims', countFile, {
        SLACK_WEBHOOK_URL: stub.url,
        RUN_LOCK_TTL_MS: String(LEASE_MS),
        RECONCILE_INTERVAL_MS: '3600000',
        NOTIFY_MAX_ATTEMPTS: '5',
      }),
    );
    delivery = t.app.get(NotificationDeliveryService);
  });
  afterAll(async () => {
    await t.close();
    await stub.close();
    await closeDb();
  });

  const pendingRow = () => pendingOutboxRow(t.app, 'run.succeeded', 'claim test');

  it('lets exactly one of ten concurrent deliverers post', async () => {
    const row = await pendingRow();
    stub.plan(row.runId, { hold: true });
    let settled = 0;
    const calls = Array.from({ length: 10 }, () => delivery.deliver(row.id).finally(() => settled++));
    await waitFor(
      () => settled === 9 && stub.held(row.runId).length === 1,
      10_000,
      'nine deliverers to be turned away',
    );
    expect(stub.for(row.runId)).toHaveLength(1);
    stub.held(row.runId)[0].release({ status: 200 });
    const results = await Promise.all(calls);
    expect(results.filter((r) => r.kind === 'sent')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'later')).toHaveLength(9);
    expect(stub.delivered(row.runId)).toBe(1);

    // Once SENT, nobody claims it again.
    expect(await delivery.deliver(row.id)).toMatchObject({ kind: 'skip' });
    expect(stub.for(row.runId)).toHaveLength(1);
  });

  it('keeps the claim alive while Slack is slow, so nobody else posts meanwhile', async () => {
    const row = await pendingRow();
    stub.plan(row.runId, { hold: true });
    const first = delivery.deliver(row.id);
    await waitFor(() => stub.held(row.runId).length === 1, 10_000, 'the first POST');
    const started = Date.now();
    const others: Array<DeliveryResult['kind']> = [];
    await waitFor(
      async () => {
        others.push((await delivery.deliver(row.id)).kind);
        return Date.now() - started > 3 * LEASE_MS;
      },
      20_000,
      'three claim leases to pass with the POST in flight',
      100,
    );
    expect(new Set(others)).toEqual(new Set(['later']));
    expect(stub.for(row.runId)).toHaveLength(1);
    stub.held(row.runId)[0].release({ status: 200 });
    expect(await first).toMatchObject({ kind: 'sent', attempts: 1 });
    expect(stub.delivered(row.runId)).toBe(1);
  });

  it('aborts the POST of a deliverer whose claim was taken over', async () => {
    const row = await pendingRow();
    stub.plan(row.runId, { hold: true });
    const first = delivery.deliver(row.id);
    await waitFor(() => stub.held(row.runId).length === 1, 10_000, 'the first POST');
    // What a takeover leaves behind (the first deliverer froze past its lease; another claimed).
    await db().query(
      `UPDATE notification_logs SET attempts = attempts + 1, claimed_until = now() + interval '1 minute' WHERE id = $1`,
      [row.id],
    );
    await waitFor(() => stub.for(row.runId)[0].state === 'aborted', 5000, 'the first deliverer to drop its POST');
    expect(await first).toMatchObject({ kind: 'later' });
    expect(stub.delivered(row.runId)).toBe(0);
  });

  it('records a 200 already on its way when the lock was lost (a stalled worker wakes up; chaos stores seed 265710487): no second post', async () => {
    const row = await pendingRow();
    stub.plan(row.runId, { hold: true });
    const lock = new AbortController();
    const first = delivery.deliver(row.id, lock.signal);
    await waitFor(() => stub.held(row.runId).length === 1, 10_000, 'the POST');
    stub.held(row.runId)[0].release({ status: 200 });
    // Blocked while Slack's answer reaches our socket; then the heartbeat's verdict comes first,
    // as when a stalled worker wakes up: timers run before the poll phase reads the answer.
    blockEventLoop(150);
    lock.abort(new Error('lock lost'));
    expect(await first).toMatchObject({ kind: 'sent', attempts: 1 });
    const { rows } = await db().query('SELECT status FROM notification_logs WHERE id = $1', [row.id]);
    expect(rows[0].status).toBe('SENT');
    // Nothing left for the next holder to post again.
    expect(await delivery.deliver(row.id)).toMatchObject({ kind: 'skip' });
    expect(stub.for(row.runId)).toHaveLength(1);
  });

  it('finishes a POST whose Redis lock alone was lost (a Redis restart) while its claim holds: one message', async () => {
    const row = await pendingRow();
    stub.plan(row.runId, { hold: true });
    const lock = new AbortController();
    const first = delivery.deliver(row.id, lock.signal);
    await waitFor(() => stub.held(row.runId).length === 1, 10_000, 'the POST');
    // The lock key vanished with Redis' memory; the claim in Postgres is still ours and extended.
    const lostAt = Date.now();
    lock.abort(new Error('lock lost: extend_failed'));
    await waitFor(
      () => Date.now() - lostAt > 2 * POST_ABORT_GRACE_MS,
      5000,
      'twice the grace of an aborted lock to pass',
    );
    expect(stub.for(row.runId)[0].state).toBe('held');
    stub.held(row.runId)[0].release({ status: 200 });
    expect(await first).toMatchObject({ kind: 'sent', attempts: 1 });
    const { rows } = await db().query('SELECT status FROM notification_logs WHERE id = $1', [row.id]);
    expect(rows[0].status).toBe('SENT');
    expect(await delivery.deliver(row.id)).toMatchObject({ kind: 'skip' });
    expect(stub.for(row.runId)).toHaveLength(1);
  });

  it('does not post before the next attempt is due', async () => {
    const row = await pendingRow();
    stub.plan(row.runId, { status: 429, headers: { 'retry-after': '2' } });
    expect(await delivery.deliver(row.id)).toMatchObject({ kind: 'retry', delayMs: 2000 });
    expect(await delivery.deliver(row.id)).toMatchObject({ kind: 'later', reason: 'next attempt not due yet' });
    expect(stub.for(row.runId)).toHaveLength(1);
    await waitFor(async () => (await delivery.deliver(row.id)).kind === 'sent', 10_000, 'the second attempt', 100);
    const [a, b] = stub.for(row.runId);
    expect(b.receivedAt - a.receivedAt).toBeGreaterThanOrEqual(1990);
    expect(stub.delivered(row.runId)).toBe(1);
  });

  it('fails, and never re-posts, a row whose final attempt died with its deliverer', async () => {
    const row = await pendingRow();
    await db().query(
      `UPDATE notification_logs SET attempts = 5, claimed_until = now() - interval '1 second' WHERE id = $1`,
      [row.id],
    );
    expect(await delivery.deliver(row.id)).toMatchObject({ kind: 'skip' });
    expect(stub.for(row.runId)).toHaveLength(0);
    expect(await t.app.get(NotificationSweeper).sweep()).toMatchObject({ failed: 1 });
    const { rows } = await db().query('SELECT status, last_error FROM notification_logs WHERE id = $1', [row.id]);
    expect(rows[0].status).toBe('FAILED');
    expect(rows[0].last_error).toMatch(/interrupted/);
  });

  it('writes one outbox row per run and event however often the writer is called', async () => {
    const row = await pendingRow();
    const again = await t.app
      .get<DataSource>(getDataSourceToken())
      .transaction((em) =>
        t.app
          .get(OutboxWriter)
          .add(em, { runId: row.runId, eventType: 'run.succeeded', text: `claim test ${row.runId} (again)` }),
      );
    expect(again).toBeNull();
    await delivery.deliver(row.id);
    expect(stub.for(row.runId)).toHaveLength(1);
    expect(stub.delivered(row.runId)).toBe(1);
  });
});

/** With a long lease the claim heartbeat stays quiet, so only the recording fence stands between a taken-over deliverer and the row. */
describe('notification claims: recording after a takeover', () => {
  const countFile = join(tempDir('notify-fence'), 'executions.log');
  let stub: SlackStub;
  let t: TestApp;

  beforeAll(async () => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv('notify-fence', countFile, {
        SLACK_WEBHOOK_URL: stub.url,
        RUN_LOCK_TTL_MS: '30000',
        RECONCILE_INTERVAL_MS: '3600000',
        NOTIFY_RETRY_BASE_DELAY_MS: '1',
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    await stub.close();
    await closeDb();
  });

  it.each([
    ['a retryable failure', 500],
    ['a permanent refusal', 404],
  ])('records nothing for %s answered after the claim was taken over', async (_what, status) => {
    const delivery = t.app.get(NotificationDeliveryService);
    const { id, runId } = await pendingOutboxRow(t.app, 'run.failed', 'fence test');
    stub.plan(runId, { hold: true });
    const first = delivery.deliver(id);
    await waitFor(() => stub.held(runId).length === 1, 10_000, 'the first POST');
    await db().query(
      `UPDATE notification_logs SET attempts = attempts + 1, claimed_until = now() + interval '1 minute' WHERE id = $1`,
      [id],
    );
    stub.held(runId)[0].release({ status });
    expect(await first).toEqual({ kind: 'later', delayMs: 30_100, reason: 'claim taken over by another deliverer' });
    // The new holder's claim still stands: a third deliverer is turned away.
    expect(await delivery.deliver(id)).toMatchObject({ kind: 'later', reason: 'claimed by another deliverer' });
    expect(stub.for(runId)).toHaveLength(1);
    const { rows } = await db().query('SELECT status, attempts FROM notification_logs WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ status: 'PENDING', attempts: 2 });
  });
});

/** No SLACK_WEBHOOK_URL: finished runs are recorded as SKIPPED, and this process touches no PENDING row. */
describe('notifications without a Slack URL', () => {
  const countFile = join(tempDir('notify-nourl'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(testEnv('notify-nourl', countFile, { RECONCILE_INTERVAL_MS: '3600000' }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('records SKIPPED with the reason and sends nothing', async () => {
    const project = await createProject(t.http);
    const { rows: runs } = await db().query(
      `INSERT INTO runs (project_id, requirement, status, attempts, fencing_token, lease_owner, lease_expires_at, started_at)
       VALUES ($1, 'no url', 'RUNNING', 1, 3, 'test-holder', now() + interval '1 hour', now()) RETURNING id`,
      [project.id],
    );
    const runId: string = runs[0].id;
    const fin = await t.app.get(RunFinalizer).finalize({
      runId,
      token: '3',
      to: RunStatus.SUCCESS,
      projectName: project.name,
      requirement: 'no url',
      outputTail: '',
      lastError: null,
      reason: 'test',
      workerId: 'test-worker',
    });
    expect(fin.kind).toBe('written');
    const res = await t.http.get('/api/notifications').query({ runId }).set(auth);
    expect(res.body).toEqual({
      items: [{ runId, eventType: 'run.succeeded', channel: 'slack', status: 'SKIPPED', attempts: 0, sentAt: null }],
    });
    const { rows } = await db().query('SELECT last_error FROM notification_logs WHERE run_id = $1', [runId]);
    expect(rows[0].last_error).toBe('SLACK_WEBHOOK_URL is not set');
    const skipped = (await t.app.get(MetricsService).notifications.get()).values.find(
      (v) => v.labels.outcome === 'skipped',
    )?.value;
    expect(skipped).toBe(1);
  });

  it("leaves a configured replica's PENDING rows alone", async () => {
    const id = randomUUID();
    await db().query(
      `INSERT INTO notification_logs (id, run_id, event_type, channel, status, message, next_attempt_at)
       VALUES ($1, $2, 'run.failed', 'slack', 'PENDING', '{"text":"x"}', now() - interval '1 hour')`,
      [id, randomUUID()],
    );
    await t.app.get(NotificationKicker).kick(id);
    expect(await t.app.get(NotificationSweeper).sweep()).toEqual({ requeued: 0, failed: 0 });
    expect(await t.app.get(NotificationDeliveryService).deliver(id)).toEqual({
      kind: 'skip',
      reason: 'SLACK_WEBHOOK_URL is not set in this process',
    });
    const queue = t.app.get<Queue>(getQueueToken(NOTIFICATIONS_QUEUE));
    expect(await (await queue.getJob(notificationJobId(id, 0)))?.getState()).toBe('waiting');
    const { rows } = await db().query('SELECT status, attempts FROM notification_logs WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ status: 'PENDING', attempts: 0 });
  });
});
