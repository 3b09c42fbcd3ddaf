import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { join } from 'node:path';
import { runJobId } from '../src/queues/job-ids';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { RunQueueReconciler } from '../src/runs/worker/run-queue-reconciler';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runRow } from './support/run-rows';

const INTERVAL_MS = 1500;
/** 2 × RECONCILE_INTERVAL_MS (above the 2 s floor): a run younger than this may still have its add in flight. */
const GRACE_MS = 2 * INTERVAL_MS;

/**
 * RunQueueReconciler.reconcileQueue called directly on prepared rows and jobs (API role: no processor
 * takes the jobs, no scheduler calls it on its own): which QUEUED/RETRYING runs it re-enqueues,
 * under which job id, and which it leaves alone. reconciler.e2e shows the same end to end (a
 * Redis wipe under load); this file pins each condition on its own.
 */
describe('the queue reconciler (RunQueueReconciler.reconcileQueue)', () => {
  const countFile = join(tempDir('requeue'), 'executions.log');
  let t: TestApp;
  let reconciler: RunQueueReconciler;
  let queue: Queue;
  let project: { id: string };

  beforeAll(async () => {
    t = await startApp(testEnv('requeue', countFile, { APP_ROLE: 'api', RECONCILE_INTERVAL_MS: String(INTERVAL_MS) }));
    reconciler = t.app.get(RunQueueReconciler);
    queue = t.app.get(getQueueToken(RUNS_QUEUE));
    project = await insertProject(10);
  });
  beforeEach(async () => {
    // Only this test's rows are old enough to be looked at (other files share the database).
    await db().query(`UPDATE runs SET updated_at = now() + interval '1 hour' WHERE status IN ('QUEUED', 'RETRYING')`);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(async () => {
    // Other files' reconcilers share the database: leave them no QUEUED run of ours to take up.
    await db().query(
      `UPDATE runs SET status = 'CANCELLED' WHERE project_id = $1 AND status IN ('QUEUED', 'RETRYING')`,
      [project.id],
    );
    await t.close();
    await closeDb();
  });

  /** A run in `status` last updated `ageMs` ago, at dispatch generation `generation`. */
  async function run(status: string, ageMs: number, generation = 3): Promise<string> {
    const id = await insertRun(project.id, { status });
    await db().query(
      `UPDATE runs SET dispatch_generation = $2, updated_at = now() - $3 * interval '1 millisecond' WHERE id = $1`,
      [id, generation, ageMs],
    );
    return id;
  }
  const jobOf = async (id: string, generation: number) => queue.getJob(runJobId(id, generation));

  it('re-enqueues a QUEUED and a RETRYING run that have no job, each under the next generation, once', async () => {
    const queued = await run('QUEUED', 10_000);
    const retrying = await run('RETRYING', 10_000, 7);
    expect(await reconciler.reconcileQueue()).toEqual({ requeued: 2 });
    for (const [id, generation] of [
      [queued, 4],
      [retrying, 8],
    ] as const) {
      expect(await runRow(id)).toMatchObject({ dispatch_generation: generation });
      const job = await jobOf(id, generation);
      expect(job?.data).toEqual({ runId: id, generation });
      expect(await job!.getState()).toBe('waiting');
    }
    // The bump refreshed updated_at: the next pass finds the runs young (and with a live job).
    expect(await reconciler.reconcileQueue()).toEqual({ requeued: 0 });
    expect((await runRow(queued)).dispatch_generation).toBe(4);
  });

  it('leaves runs younger than twice the interval alone (their add may still be on its way)', async () => {
    const young = await run('QUEUED', GRACE_MS - 500);
    const old = await run('QUEUED', GRACE_MS + 500);
    expect(await reconciler.reconcileQueue()).toEqual({ requeued: 1 });
    expect((await runRow(young)).dispatch_generation).toBe(3);
    expect((await runRow(old)).dispatch_generation).toBe(4);
  });

  it('looks only at QUEUED and RETRYING runs', async () => {
    const others = await Promise.all(
      ['PENDING', 'RUNNING', 'SUCCESS', 'FAILED', 'CANCELLED'].map((s) => run(s, 10_000)),
    );
    expect(await reconciler.reconcileQueue()).toEqual({ requeued: 0 });
    for (const id of others) {
      expect((await runRow(id)).dispatch_generation).toBe(3);
      expect(await jobOf(id, 4)).toBeNull();
    }
  });

  it('leaves a run whose job is waiting or delayed; re-enqueues one whose job completed, or sits in no list (stuck)', async () => {
    const waiting = await run('QUEUED', 10_000);
    const delayed = await run('RETRYING', 10_000);
    const completed = await run('QUEUED', 10_000);
    const stuck = await run('RETRYING', 10_000);
    await queue.add({ runId: waiting, generation: 3 }, { jobId: runJobId(waiting, 3) });
    await queue.add({ runId: delayed, generation: 3 }, { jobId: runJobId(delayed, 3), delay: 60_000 });
    // A job that ran before (its hash kept in Redis), and what a Redis wipe racing Bull leaves: a hash in no list.
    for (const id of [completed, stuck]) {
      await queue.add({ runId: id, generation: 3 }, { jobId: runJobId(id, 3) });
      await queue.client.lrem(queue.toKey('wait'), 0, runJobId(id, 3));
    }
    await queue.client.zadd(queue.toKey('completed'), Date.now(), runJobId(completed, 3));
    expect(await (await jobOf(completed, 3))!.getState()).toBe('completed');
    expect(await (await jobOf(stuck, 3))!.getState()).toBe('stuck');
    expect(await (await jobOf(delayed, 3))!.getState()).toBe('delayed');
    expect(await reconciler.reconcileQueue()).toEqual({ requeued: 2 });
    expect((await runRow(waiting)).dispatch_generation).toBe(3);
    expect((await runRow(delayed)).dispatch_generation).toBe(3);
    for (const id of [completed, stuck]) {
      expect((await runRow(id)).dispatch_generation).toBe(4);
      expect(await (await jobOf(id, 4))!.getState()).toBe('waiting');
    }
  });

  it('enqueues nothing for a run another dispatcher bumped, or someone cancelled, after the reconciler looked', async () => {
    const bumped = await run('QUEUED', 10_000);
    const cancelled = await run('RETRYING', 10_000);
    const realGetJob = queue.getJob.bind(queue);
    jest.spyOn(queue, 'getJob').mockImplementation(async (jobId) => {
      if (jobId === runJobId(bumped, 3))
        await db().query(`UPDATE runs SET dispatch_generation = 9 WHERE id = $1`, [bumped]);
      if (jobId === runJobId(cancelled, 3))
        await db().query(`UPDATE runs SET status = 'CANCELLED' WHERE id = $1`, [cancelled]);
      return realGetJob(jobId);
    });
    expect(await reconciler.reconcileQueue()).toEqual({ requeued: 0 });
    expect((await runRow(bumped)).dispatch_generation).toBe(9);
    expect((await runRow(cancelled)).dispatch_generation).toBe(3);
    expect(await jobOf(bumped, 4)).toBeNull();
    expect(await jobOf(bumped, 10)).toBeNull();
    expect(await jobOf(cancelled, 4)).toBeNull();
  });
});
