import Bull, { Job, Queue } from 'bull';
import { join } from 'node:path';
import { Pool } from 'pg';
import { TaskLockService } from '../src/locks/task-lock.service';
import { MetricsService } from '../src/metrics/metrics.service';
import { queueOptions } from '../src/queues/queue-settings';
import { closeDb, freePort, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';

const BASE_MS = 40;
const CAP_MS = 640;
const JOBS = 10;
/** Each job throws on this many attempts, then succeeds. */
const FAILURES = 9;

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/**
 * Jobs whose handler throws (what an unreachable Postgres or Redis looks like to a processor) are
 * retried with exponential, jittered, capped backoff: measured from the attempts' own timestamps,
 * through the real Bull settings and the real processor guard.
 */
describe('infrastructure errors in a guarded processor back off', () => {
  const countFile = join(tempDir('infra-backoff'), 'executions.log');
  let t: TestApp;
  const queues: Queue[] = [];

  beforeAll(async () => {
    t = await startApp(
      testEnv('infra-backoff', countFile, {
        APP_ROLE: 'worker',
        INFRA_RETRY_BASE_DELAY_MS: String(BASE_MS),
        INFRA_RETRY_MAX_DELAY_MS: String(CAP_MS),
      }),
    );
  });
  afterAll(async () => {
    for (const q of queues) await q.close().catch(() => undefined);
    await t.close();
    await closeDb();
  });

  function probeQueue(name: string, handler: (job: Job) => Promise<unknown>): Queue {
    const queue = new Bull(name, queueOptions(t.config));
    queues.push(queue);
    t.app
      .get(TaskLockService)
      .process(queue, { name, concurrency: JOBS, ttlMs: 5000, lockKey: (job) => `${name}:${job.id}`, handler });
    return queue;
  }

  const retries = async (queue: string, reason: string) =>
    (await t.app.get(MetricsService).infraRetries.get()).values.find(
      (v) => v.labels.queue === queue && v.labels.reason === reason,
    )?.value ?? 0;

  it('waits longer after each failure, never longer than the cap, and counts every retry', async () => {
    const attempts = new Map<string, number[]>();
    const queue = probeQueue('backoff-probe', async (job) => {
      const seen = attempts.get(String(job.id)) ?? [];
      seen.push(performance.now());
      attempts.set(String(job.id), seen);
      if (seen.length <= FAILURES) throw new Error('the handler failed (simulated)');
      return 'ok';
    });
    for (let i = 0; i < JOBS; i++) await queue.add({ i }, { jobId: `probe-${i}` });
    await waitFor(
      () => attempts.size === JOBS && [...attempts.values()].every((a) => a.length === FAILURES + 1),
      60_000,
      `${JOBS} jobs to fail ${FAILURES} times and then succeed`,
    );

    // gaps[k] = wait after the (k+1)-th failure; its ceiling is min(cap, base * 2^k).
    const gaps = [...attempts.values()].map((ts) => ts.slice(1).map((at, k) => at - ts[k]));
    const early = gaps.flatMap((g) => g.slice(0, 2)); // ceilings 40, 80 ms
    const late = gaps.flatMap((g) => g.slice(4)); // ceiling 640 ms (the cap)
    const summary = `early ${mean(early).toFixed(0)} ms, late ${mean(late).toFixed(0)} ms, longest ${Math.max(...late).toFixed(0)} ms`;
    // Full jitter: late gaps average about half the cap, early ones a few tens of ms. The old
    // fixed 0.5-2 s delay gives ~1250 ms for both and fails all three lines.
    expect({ summary, grows: mean(late) > 3 * mean(early) }).toEqual({ summary, grows: true });
    expect({ summary, underCap: mean(late) < CAP_MS * 0.75 }).toEqual({ summary, underCap: true });
    // A single gap may run over the cap by Bull's delay timer and a loaded machine, not by seconds.
    expect({ summary, capped: late.filter((g) => g > CAP_MS + 400).length }).toEqual({ summary, capped: 0 });
    expect(await retries('backoff-probe', 'error')).toBe(JOBS * FAILURES);
  });

  it('labels a Postgres that cannot be reached', async () => {
    const deadPort = await freePort();
    const pool = new Pool({
      connectionString: `postgres://postgres@127.0.0.1:${deadPort}/nothing`,
      connectionTimeoutMillis: 1000,
    });
    let calls = 0;
    probeQueue('backoff-pg-probe', async () => {
      calls++;
      if (calls > 3) return 'enough';
      return pool.query('SELECT 1');
    });
    await queues[queues.length - 1].add({}, { jobId: 'pg-probe' });
    await waitFor(() => calls > 3, 20_000, 'three failed attempts against a closed port');
    await pool.end();
    expect(await retries('backoff-pg-probe', 'postgres')).toBe(3);
  });
});
