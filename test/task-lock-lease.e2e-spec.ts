import Bull, { type Job } from 'bull';
import Redis from 'ioredis';
import { join } from 'node:path';
import { LockLostError, ShutdownAbort } from '../src/locks/heartbeat';
import { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { RetryLaterError } from '../src/locks/retry-later.error';
import { MetricsService } from '../src/metrics/metrics.service';
import { Lease, TaskLockService } from '../src/locks/task-lock.service';
import { closeDb, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv, testRedisUrl, uniquePrefix } from './support/env';
import { TcpProxy } from './support/tcp-proxy';

type Spec = Parameters<TaskLockService['runGuarded']>[1];
const job = (id: string) => ({ id, data: {} }) as unknown as Job<unknown>;
/** onceflow_lock_losses_total for one reason (operators alert on it). */
const lockLosses = async (t: TestApp, reason: string) =>
  (await t.app.get(MetricsService).lockLosses.get()).values
    .filter((v) => v.labels.reason === reason)
    .reduce((n, v) => n + v.value, 0);

/**
 * TaskLockService.runGuarded called directly (API role: no queue worker competes): what a guarded
 * handler holds, what it gets when the lock is busy or lost, and what a shutdown does to it.
 */
describe('TaskLockService leases', () => {
  const countFile = join(tempDir('lease'), 'executions.log');
  let t: TestApp;
  let guard: TaskLockService;
  let locks: LockService;
  let redis: Redis;
  const spec = (key: string, handler: Spec['handler'], ttlMs = 3000): Spec => ({
    name: 'test',
    concurrency: 1,
    ttlMs,
    lockKey: () => key,
    handler,
  });

  beforeAll(async () => {
    t = await startApp(testEnv('lease', countFile, { APP_ROLE: 'api' }));
    guard = t.app.get(TaskLockService);
    locks = t.app.get(LOCK_SERVICE);
    redis = new Redis(testRedisUrl());
  });
  afterAll(async () => {
    await t.close();
    await redis.quit();
    await closeDb();
  });

  it('holds the lock (with a fresh token) while the handler runs, and frees it after', async () => {
    const key = `held-${Date.now()}`;
    const first = await locks.acquire(key, 1000);
    await locks.release(first!);
    let seen: { lease: Lease; owner: string | null; active: number } | undefined;
    const result = await guard.runGuarded(
      job('j1'),
      spec(key, async (_job, lease) => {
        seen = { lease, owner: await redis.get(locks.lockKey(key)), active: guard.activeLeaseCount() };
        return 'done';
      }),
    );
    expect(result).toBe('done');
    expect(seen!.lease).toMatchObject({ key, token: first!.token + 1 });
    expect(seen!.owner).toBe(seen!.lease.owner);
    expect(seen!.active).toBe(1);
    expect(seen!.lease.signal.aborted).toBe(false);
    expect(await redis.exists(locks.lockKey(key))).toBe(0);
    expect(guard.activeLeaseCount()).toBe(0);
  });

  it('releases the lock when the handler throws, and passes the error on', async () => {
    const key = `throws-${Date.now()}`;
    const boom = new Error('handler failed');
    await expect(
      guard.runGuarded(
        job('j2'),
        spec(key, () => Promise.reject(boom)),
      ),
    ).rejects.toBe(boom);
    expect(await redis.exists(locks.lockKey(key))).toBe(0);
    expect(guard.activeLeaseCount()).toBe(0);
  });

  it('a busy lock is a RetryLaterError timed after the holder’s TTL; the handler never runs', async () => {
    const key = `busy-${Date.now()}`;
    await redis.set(locks.lockKey(key), 'another-worker', 'PX', 2000);
    let ran = false;
    const jitters: number[] = [];
    for (let i = 0; i < 5; i++) {
      const before = await redis.pttl(locks.lockKey(key));
      const err = await guard
        .runGuarded(
          job('j3'),
          spec(key, async () => (ran = true)),
        )
        .catch((e: unknown) => e);
      const after = await redis.pttl(locks.lockKey(key));
      expect(err).toBeInstanceOf(RetryLaterError);
      const delay = (err as RetryLaterError).retryDelayMs;
      // At least the holder's remaining TTL + 50 ms, plus up to 200 ms of jitter.
      expect(delay).toBeGreaterThanOrEqual(after + 50);
      expect(delay).toBeLessThan(before + 250);
      jitters.push(delay - before);
    }
    // Duplicates spread out: five draws of the jitter are not all (close to) zero.
    expect(Math.max(...jitters)).toBeGreaterThan(60);
    expect(ran).toBe(false);
    expect(await redis.get(locks.lockKey(key))).toBe('another-worker');

    // A holder without a TTL (pttl -1) still gets a small positive delay.
    await redis.set(locks.lockKey(`${key}-forever`), 'another-worker');
    const again = await guard
      .runGuarded(
        job('j4'),
        spec(`${key}-forever`, async () => (ran = true)),
      )
      .catch((e: unknown) => e);
    expect((again as RetryLaterError).retryDelayMs).toBeGreaterThanOrEqual(50);
    expect((again as RetryLaterError).retryDelayMs).toBeLessThan(250);
    await redis.del(locks.lockKey(`${key}-forever`));
  });

  it('runs every onBeat check on each beat; one false check aborts the lease (check_failed)', async () => {
    const key = `checks-${Date.now()}`;
    let calls = 0;
    const reason = await guard.runGuarded(
      job('j5'),
      spec(
        key,
        async (_job, lease) => {
          lease.onBeat(async () => ++calls > 0);
          lease.onBeat(async () => calls < 3);
          await waitFor(() => lease.signal.aborted, 3000, 'the lease to be aborted by a check');
          return lease.signal.reason;
        },
        300,
      ),
    );
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('check_failed');
    expect(calls).toBe(3);
  });

  it('a lock taken over aborts the lease (extend_failed) and the release leaves the new holder alone', async () => {
    const key = `stolen-${Date.now()}`;
    const losses = () => lockLosses(t, 'extend_failed');
    const lossesBefore = await losses();
    const reason = await guard.runGuarded(
      job('j6'),
      spec(
        key,
        async (_job, lease) => {
          await redis.set(locks.lockKey(key), 'thief', 'PX', 5000);
          await waitFor(() => lease.signal.aborted, 3000, 'the lease to notice the theft');
          return lease.signal.reason;
        },
        300,
      ),
    );
    expect((reason as LockLostError).reason).toBe('extend_failed');
    expect(await losses()).toBe(lossesBefore + 1);
    expect(await redis.get(locks.lockKey(key))).toBe('thief');
    await redis.del(locks.lockKey(key));
  });

  it('a lock key that vanished (Redis flushed) is taken again for work fenced in Postgres; a thief still wins', async () => {
    const retaken = async () =>
      (await t.app.get(MetricsService).lockAcquisitions.get()).values
        .filter((v) => v.labels.result === 'retaken')
        .reduce((n, v) => n + v.value, 0);
    const before = await retaken();
    const key = `vanished-${Date.now()}`;
    const fenced = { ...spec(key, async () => undefined, 300), fencedInPostgres: true };
    const seen = (await guard.runGuarded(job('j7'), {
      ...fenced,
      handler: async (_job, lease) => {
        await redis.del(locks.lockKey(key));
        // Three beats (every 100 ms) after the key vanished: the lease must still be up.
        await new Promise((r) => setTimeout(r, 400));
        return { aborted: lease.signal.aborted, holder: await redis.get(locks.lockKey(key)), owner: lease.owner };
      },
    })) as { aborted: boolean; holder: string | null; owner: string };
    expect(seen.aborted).toBe(false);
    expect(seen.holder).toBe(seen.owner);
    expect(await retaken()).toBeGreaterThan(before);
    expect(await redis.exists(locks.lockKey(key))).toBe(0);

    // Without a fence of its own the work cannot tell a flush from a lapse: the lease is lost.
    const plain = await guard.runGuarded(
      job('j8'),
      spec(
        key,
        async (_job, lease) => {
          await redis.del(locks.lockKey(key));
          await waitFor(() => lease.signal.aborted, 3000, 'the lease to notice the vanished key');
          return lease.signal.reason;
        },
        300,
      ),
    );
    expect((plain as LockLostError).reason).toBe('extend_failed');

    // A key another owner holds is lost even for fenced work.
    const stolen = await guard.runGuarded(job('j9'), {
      ...fenced,
      handler: async (_job, lease) => {
        await redis.set(locks.lockKey(key), 'thief', 'PX', 5000);
        await waitFor(() => lease.signal.aborted, 3000, 'the lease to notice the theft');
        return lease.signal.reason;
      },
    });
    expect((stolen as LockLostError).reason).toBe('extend_failed');
    expect(await redis.get(locks.lockKey(key))).toBe('thief');
    await redis.del(locks.lockKey(key));
  });
});

describe('TaskLockService on shutdown', () => {
  afterAll(closeDb);

  it('aborts every running lease with ShutdownAbort (not a loss) and waits for their handlers before closing', async () => {
    const t = await startApp(testEnv('lease-stop', join(tempDir('lease-stop'), 'executions.log'), { APP_ROLE: 'api' }));
    const guard = t.app.get(TaskLockService);
    const locks = t.app.get<LockService>(LOCK_SERVICE);
    const keys = [`shutdown-a-${Date.now()}`, `shutdown-b-${Date.now()}`];
    const finished: string[] = [];
    const reasons: unknown[] = [];
    const running = keys.map((key) =>
      guard.runGuarded(job(key), {
        name: 'test',
        concurrency: 1,
        ttlMs: 3000,
        lockKey: () => key,
        handler: async (_job, lease) => {
          await waitFor(() => lease.signal.aborted, 10_000, 'the shutdown abort');
          reasons.push(lease.signal.reason);
          // Handing the work back takes a while (longer than the rest of close() takes); close()
          // must wait for it.
          await new Promise((r) => setTimeout(r, 1500));
          finished.push(key);
        },
      }),
    );
    await waitFor(() => guard.activeLeaseCount() === 2, 3000, 'both leases to be taken');
    const lossesBefore = (await lockLosses(t, 'unknown')) + (await lockLosses(t, 'stopped'));
    const lockKeys = keys.map((k) => locks.lockKey(k));
    const closing = Date.now();
    await t.close();
    expect(Date.now() - closing).toBeLessThan(5000);
    expect(finished.sort()).toEqual([...keys].sort());
    expect(reasons).toEqual([expect.any(ShutdownAbort), expect.any(ShutdownAbort)]);
    expect((await lockLosses(t, 'unknown')) + (await lockLosses(t, 'stopped'))).toBe(lossesBefore);
    await Promise.all(running);
    expect(guard.activeLeaseCount()).toBe(0);
    const redis = new Redis(testRedisUrl());
    expect(await redis.exists(...lockKeys)).toBe(0);
    await redis.quit();
  });
});

/**
 * A queue closed while its blocking connection is still coming up: Bull starts CLIENT SETNAME on
 * that connection from process() and drops the promise, so its rejection was unhandled — Node
 * ends a process on that (seen in CI: a worker-only app closed moments after it started).
 */
describe('TaskLockService.process on a queue closed as it starts', () => {
  afterAll(closeDb);

  it('leaves no unhandled rejection when the blocking connection never came up', async () => {
    const t = await startApp(
      testEnv('lease-close', join(tempDir('lease-close'), 'executions.log'), { APP_ROLE: 'api' }),
    );
    const proxy = await TcpProxy.for(testRedisUrl(), 6379).start();
    const queue = new Bull(`close-race-${Date.now()}`, {
      redis: proxy.url(testRedisUrl()),
      prefix: uniquePrefix('race'),
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await queue.isReady();
      // The queue's own connection is up; the blocking one process() opens next never answers.
      proxy.hangNew();
      t.app.get(TaskLockService).process(queue, {
        name: 'race',
        concurrency: 1,
        ttlMs: 1000,
        lockKey: (job) => String(job.id),
        handler: async () => undefined,
      });
      await new Promise((r) => setTimeout(r, 100));
      await queue.close();
      await new Promise((r) => setTimeout(r, 300));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await proxy.stop();
      await t.close();
    }
  });
});
