import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { POST_ABORT_GRACE_MS } from '../src/notifications/notification-delivery.service';
import { NotificationKicker } from '../src/notifications/notification-kicker';
import { notificationJobId, notificationLockKey } from '../src/queues/job-ids';
import { NOTIFICATIONS_QUEUE } from '../src/queues/queue-names';
import { RunFinalizer } from '../src/runs/worker/run-finalizer';
import { RunStatus } from '../src/runs/run-status';
import { auth, closeDb, createProject, createRun, db, startApp, TestApp, waitFor, waitForStatus } from './support/app';
import { tempDir, testEnv, testRedisUrl } from './support/env';
import { SlackStub } from './support/slack-stub';

/**
 * The outbox end to end: finalize (fenced, with the outbox row in its transaction) → kick →
 * notifications processor → Slack. Deliveries are counted by the Slack stub, from outside.
 */
describe('notifications outbox', () => {
  const countFile = join(tempDir('notify'), 'executions.log');
  let stub: SlackStub;
  let t: TestApp;
  let queue: Queue;
  let project: { id: string; name: string };

  beforeAll(async () => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv('notify', countFile, { SLACK_WEBHOOK_URL: stub.url, NOTIFY_MAX_ATTEMPTS: '4', WORKER_CONCURRENCY: '8' }),
    );
    queue = t.app.get(getQueueToken(NOTIFICATIONS_QUEUE));
    project = await createProject(t.http, { maxConcurrentRuns: 200 });
  });
  afterAll(async () => {
    await t.close();
    await stub.close();
    await closeDb();
  });

  /** Runs put straight into RUNNING with a known fencing token, as a worker's claim leaves them. */
  async function runningRuns(n: number, token: number): Promise<string[]> {
    const { rows } = await db().query(
      `INSERT INTO runs (project_id, requirement, status, attempts, fencing_token, lease_owner, lease_expires_at, started_at)
       SELECT $1, 'notify test ' || g || E'\\nnot this line', 'RUNNING', 1, $2, 'test-holder', now() + interval '1 hour', now()
         FROM generate_series(1, $3) g RETURNING id`,
      [project.id, token, n],
    );
    return rows.map((r: { id: string }) => r.id);
  }

  function finalize(runId: string, token: number, to: RunStatus.SUCCESS | RunStatus.FAILED) {
    return t.app.get(RunFinalizer).finalize({
      runId,
      token: String(token),
      to,
      projectName: project.name,
      requirement: 'notify test\nnot this line',
      outputTail: '',
      lastError: to === RunStatus.FAILED ? 'boom' : null,
      reason: 'test',
      workerId: 'test-worker',
    });
  }

  /** Finalize as RunProcessor does: kick delivery after the commit when a row was written. */
  async function finalizeAndKick(runId: string, token: number, to: RunStatus.SUCCESS | RunStatus.FAILED) {
    const result = await finalize(runId, token, to);
    if (result.kind === 'written' && result.notificationId)
      await t.app.get(NotificationKicker).kick(result.notificationId);
    return result;
  }

  /** Nothing left that could post: every row of these runs is final and no job is pending. */
  async function quiet(runIds: string[]): Promise<void> {
    await waitFor(
      async () => {
        const { rows } = await db().query(
          `SELECT count(*)::int AS n FROM notification_logs WHERE run_id = ANY($1) AND status = 'PENDING'`,
          [runIds],
        );
        const c = await queue.getJobCounts();
        return rows[0].n === 0 && c.waiting + c.active + c.delayed === 0;
      },
      30_000,
      'notifications to settle and the queue to drain',
    );
  }

  async function listed(runId: string) {
    const res = await t.http.get('/api/notifications').query({ runId }).set(auth);
    expect(res.status).toBe(200);
    return res.body.items as Array<{
      runId: string;
      eventType: string;
      channel: string;
      status: string;
      attempts: number;
      sentAt: string | null;
    }>;
  }

  it('announces 100 concurrently finished runs exactly once each, despite duplicate and stale finalizes', async () => {
    const ids = await runningRuns(100, 5);
    const started = Date.now();
    // Per run: the holder (token 5), a duplicate of its finalize, and a stale holder (token 4)
    // that believes the run failed. Only the holder's fenced transition may write the outbox row.
    const results = await Promise.all(
      ids.flatMap((id) => [
        finalizeAndKick(id, 5, RunStatus.SUCCESS),
        finalizeAndKick(id, 5, RunStatus.SUCCESS),
        finalizeAndKick(id, 4, RunStatus.FAILED),
      ]),
    );
    expect(results.filter((r) => r.kind === 'written')).toHaveLength(100);
    await waitFor(() => ids.every((id) => stub.delivered(id) >= 1), 30_000, '100 messages at the stub');
    const elapsedMs = Date.now() - started;
    await quiet(ids);
    for (const id of ids) {
      expect(stub.for(id)).toHaveLength(1);
      expect(stub.delivered(id)).toBe(1);
      expect(stub.for(id)[0].text).toContain('SUCCESS');
    }
    // Measured figures for docs/notifications.md: throughput, and the gap between Slack's 200
    // leaving the stub and our SENT (sent_at) — the window in which a crash repeats a message.
    const { rows } = await db().query('SELECT run_id, sent_at FROM notification_logs WHERE run_id = ANY($1)', [ids]);
    const gaps = rows
      .map((r: { run_id: string; sent_at: Date }) => new Date(r.sent_at).getTime() - stub.for(r.run_id)[0].answeredAt!)
      .sort((a: number, b: number) => a - b);
    process.stdout.write(
      `notifications: 100 runs finalized and announced in ${elapsedMs} ms (${((100 * 1000) / elapsedMs).toFixed(1)} msg/s); ` +
        `200 → sent_at gap p50 ${gaps[50]} ms, max ${gaps[gaps.length - 1]} ms\n`,
    );
  });

  it('retries through two 500s and delivers once, after 3 attempts', async () => {
    const [id] = await runningRuns(1, 5);
    stub.plan(id, { status: 500 }, { status: 500 });
    await finalizeAndKick(id, 5, RunStatus.SUCCESS);
    await waitFor(() => stub.delivered(id) === 1, 20_000, 'the third attempt to get through');
    await quiet([id]);
    expect(stub.for(id).map((r) => r.status)).toEqual([500, 500, 200]);
    expect(await listed(id)).toEqual([expect.objectContaining({ status: 'SENT', attempts: 3 })]);
  });

  it("waits out a 429's Retry-After before the next attempt", async () => {
    const [id] = await runningRuns(1, 5);
    stub.plan(id, { status: 429, headers: { 'retry-after': '1' } });
    await finalizeAndKick(id, 5, RunStatus.SUCCESS);
    await waitFor(() => stub.delivered(id) === 1, 20_000, 'delivery after the 429');
    await quiet([id]);
    const [first, second] = stub.for(id);
    expect(stub.for(id)).toHaveLength(2);
    // NOTIFY_RETRY_BASE_DELAY_MS is 50 here: only Retry-After explains a gap of a second.
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(990);
    expect(second.receivedAt - first.receivedAt).toBeLessThan(5000);
  });

  it('gives up after NOTIFY_MAX_ATTEMPTS and leaves the row FAILED with the reason', async () => {
    const [id] = await runningRuns(1, 5);
    stub.plan(id, ...Array.from({ length: 4 }, () => ({ status: 503, body: 'service_unavailable' })));
    await finalizeAndKick(id, 5, RunStatus.SUCCESS);
    await quiet([id]);
    expect(stub.for(id)).toHaveLength(4);
    expect(stub.delivered(id)).toBe(0);
    expect(await listed(id)).toEqual([expect.objectContaining({ status: 'FAILED', attempts: 4, sentAt: null })]);
    const { rows } = await db().query('SELECT last_error FROM notification_logs WHERE run_id = $1', [id]);
    expect(rows[0].last_error).toBe('Slack answered 503: service_unavailable');
  });

  it('does not retry a message Slack refuses outright (a 4xx other than 429)', async () => {
    const [id] = await runningRuns(1, 5);
    stub.plan(id, { status: 404, body: 'no_service' });
    await finalizeAndKick(id, 5, RunStatus.SUCCESS);
    await quiet([id]);
    expect(stub.for(id)).toHaveLength(1);
    expect(await listed(id)).toEqual([expect.objectContaining({ status: 'FAILED', attempts: 1 })]);
  });

  it('creates no notification for a fenced-out finalize', async () => {
    const [id] = await runningRuns(1, 7);
    const stale = await finalize(id, 6, RunStatus.FAILED);
    expect(stale.kind).toBe('fenced');
    expect(await listed(id)).toEqual([]);
    // The holder's finalize still works, and announces the real outcome only.
    expect((await finalizeAndKick(id, 7, RunStatus.SUCCESS)).kind).toBe('written');
    await waitFor(() => stub.delivered(id) === 1, 20_000, 'the holder’s message');
    await quiet([id]);
    expect(stub.for(id)).toHaveLength(1);
    expect(stub.for(id)[0].text).toContain('SUCCESS');
    expect(await listed(id)).toEqual([expect.objectContaining({ eventType: 'run.succeeded' })]);
  });

  it('delivers a row whose kick was lost: the sweeper finds it', async () => {
    const [id] = await runningRuns(1, 5);
    expect((await finalize(id, 5, RunStatus.FAILED)).kind).toBe('written'); // no kick
    await waitFor(() => stub.delivered(id) === 1, 20_000, 'the sweeper to deliver the unkicked row');
    await quiet([id]);
    expect(stub.for(id)).toHaveLength(1);
    expect(stub.for(id)[0].text).toContain('FAILED');
  });

  it('delivers a PENDING row even while a finished job with its job id is still kept in Redis', async () => {
    const notificationId = randomUUID();
    const runId = randomUUID();
    // A job for this id ran before its row existed and completed with nothing to do.
    await t.app.get(NotificationKicker).kick(notificationId);
    const jobId = notificationJobId(notificationId, 0);
    await waitFor(
      async () => (await (await queue.getJob(jobId))?.getState()) === 'completed',
      10_000,
      'the early job to complete',
    );
    await db().query(
      `INSERT INTO notification_logs (id, run_id, event_type, channel, status, message) VALUES ($1, $2, 'run.succeeded', 'slack', 'PENDING', $3)`,
      [notificationId, runId, JSON.stringify({ text: `late row for ${runId}` })],
    );
    await t.app.get(NotificationKicker).kick(notificationId);
    await waitFor(() => stub.delivered(runId) === 1, 20_000, 'the late row to be delivered');
    await quiet([runId]);
    expect(stub.for(runId)).toHaveLength(1);
  });

  it('delivers a PENDING row even while a job record with its job id sits in no list at all (stuck)', async () => {
    const notificationId = randomUUID();
    const runId = randomUUID();
    await t.app.get(NotificationKicker).kick(notificationId);
    const jobId = notificationJobId(notificationId, 0);
    await waitFor(
      async () => (await (await queue.getJob(jobId))?.getState()) === 'completed',
      10_000,
      'the early job to complete',
    );
    // What a Redis wipe racing Bull's own scripts leaves: the job's hash, in no list. Bull
    // answers an add of that id by doing nothing.
    await queue.client.zrem(queue.toKey('completed'), jobId);
    expect(await (await queue.getJob(jobId))!.getState()).toBe('stuck');
    await db().query(
      `INSERT INTO notification_logs (id, run_id, event_type, channel, status, message) VALUES ($1, $2, 'run.succeeded', 'slack', 'PENDING', $3)`,
      [notificationId, runId, JSON.stringify({ text: `row behind a stuck job for ${runId}` })],
    );
    await t.app.get(NotificationKicker).kick(notificationId);
    await waitFor(() => stub.delivered(runId) === 1, 20_000, 'the row behind the stuck job to be delivered');
    await quiet([runId]);
    expect(stub.for(runId)).toHaveLength(1);
  });

  it('runs the real path: a finished run is announced with its id, project, status and first line', async () => {
    const ok = await createRun(t.http, project.id, 'ship the feature\nsecond line stays out', true);
    const bad = await createRun(t.http, project.id, 'this one will fail', true);
    await waitForStatus([ok.id], ['SUCCESS']);
    await waitForStatus([bad.id], ['FAILED']);
    await waitFor(() => stub.delivered(ok.id) === 1 && stub.delivered(bad.id) === 1, 20_000, 'both messages');
    await quiet([ok.id, bad.id]);
    const text = stub.for(ok.id)[0].text;
    for (const part of [ok.id, project.name, 'SUCCESS', 'ship the feature']) expect(text).toContain(part);
    expect(text).not.toContain('second line');
    expect(stub.for(bad.id)[0].text).toContain('FAILED');

    const items = await listed(ok.id);
    expect(items).toEqual([
      {
        runId: ok.id,
        eventType: 'run.succeeded',
        channel: 'slack',
        status: 'SENT',
        attempts: 1,
        sentAt: expect.any(String),
      },
    ]);
    expect(Number.isNaN(Date.parse(items[0].sentAt!))).toBe(false);
    expect(await listed(bad.id)).toEqual([expect.objectContaining({ eventType: 'run.failed', status: 'SENT' })]);
    expect(await listed(randomUUID())).toEqual([]);
  });

  it('finishes the POST when only the notification lock is lost (a Redis wipe): one message', async () => {
    const [id] = await runningRuns(1, 5);
    stub.plan(id, { hold: true });
    const fin = await finalizeAndKick(id, 5, RunStatus.SUCCESS);
    if (fin.kind !== 'written' || !fin.notificationId) throw new Error('finalize wrote no notification');
    const lockKey = `${t.config.redis.prefix}:lock:${notificationLockKey(fin.notificationId)}`;
    await waitFor(() => stub.held(id).length === 1, 10_000, 'the first POST');
    const redis = new Redis(testRedisUrl());
    try {
      expect(await redis.del(lockKey)).toBe(1);
    } finally {
      await redis.quit();
    }
    // The next beat finds the key gone (a third of the TTL), then the grace a POST would get.
    const deletedAt = Date.now();
    await waitFor(
      () => Date.now() - deletedAt > 2 * (t.config.runs.lockTtlMs / 3 + POST_ABORT_GRACE_MS),
      10_000,
      'the lock loss and its grace to pass',
    );
    // Slack has the request and the claim in Postgres is still ours: dropping it would post twice.
    expect(stub.for(id)[0].state).toBe('held');
    stub.held(id)[0].release({ status: 200 });
    await waitFor(() => stub.delivered(id) === 1, 10_000, 'the answer');
    await quiet([id]);
    expect(stub.for(id)).toHaveLength(1);
  });

  it('guards GET /api/notifications: bearer token and a UUID runId', async () => {
    const runId = randomUUID();
    expect((await t.http.get('/api/notifications').query({ runId })).status).toBe(401);
    const bad = await t.http.get('/api/notifications').query({ runId: 'not-a-uuid' }).set(auth);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect((await t.http.get('/api/notifications').set(auth)).status).toBe(400);
  });
});
