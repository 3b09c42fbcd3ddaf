import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { join } from 'node:path';
import { LockService } from '../src/locks/lock.service';
import { MetricsService } from '../src/metrics/metrics.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { runJobId, runLockKey } from '../src/queues/job-ids';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { ClaimBatch } from '../src/runs/worker/claim-batch';
import { RunClaimService } from '../src/runs/worker/run-claim.service';
import { RunReaper } from '../src/runs/worker/run-reaper';
import { RunClaimRepository } from '../src/runs/worker/run-claim.repository';
import { RunWorkerRepository } from '../src/runs/worker/run-worker.repository';
import { RunTransitionsRepository } from '../src/runs/run-transitions.repository';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';

/**
 * The reaper's three conditions, each on its own, on prepared rows: it takes back a RUNNING run
 * only if its lease expired, no one holds its Redis lock, and — at the moment it writes — the run
 * is still the one it looked at (same fencing token, lease still expired). The last two are raced
 * deterministically: the test runs a competing write (a renewal, a newer attempt, a real claim)
 * between the reaper's look and its write, by stepping in front of its transition.
 */
describe('the reaper (RunReaper.reapStuck)', () => {
  const countFile = join(tempDir('reaper'), 'executions.log');
  let t: TestApp;
  let reaper: RunReaper;
  let transitions: RunTransitionsRepository;
  let locks: LockService;
  let queue: Queue;
  let project: { id: string };
  const MAX_ATTEMPTS = 3;

  beforeAll(async () => {
    // The api role: no processor consumes the jobs the reaper enqueues, and no scheduler runs it on its own.
    t = await startApp(testEnv('reaper', countFile, { APP_ROLE: 'api', RUN_MAX_ATTEMPTS: String(MAX_ATTEMPTS) }));
    reaper = t.app.get(RunReaper);
    transitions = t.app.get(RunTransitionsRepository);
    locks = t.app.get(LOCK_SERVICE);
    queue = t.app.get(getQueueToken(RUNS_QUEUE));
    project = await insertProject(10);
  });
  beforeEach(async () => {
    // Stuck runs other files left in the shared database must not count in this file's answers.
    await db().query(
      `UPDATE runs SET lease_expires_at = now() + interval '1 hour' WHERE status = 'RUNNING' AND project_id <> $1`,
      [project.id],
    );
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    // Nothing a test leaves RUNNING may be reaped by the next one.
    await db().query(
      `UPDATE runs SET status = 'CANCELLED', lease_expires_at = NULL WHERE project_id = $1 AND status = 'RUNNING'`,
      [project.id],
    );
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  /** A RUNNING run whose holder died: lease ended `leaseMs` from now (negative: expired). */
  const stuckRun = (leaseMs = -1000, attempts = 1) =>
    insertRun(project.id, {
      status: 'RUNNING',
      attempts,
      fencing_token: 4,
      lease_owner: 'dead-worker',
      leaseMs,
      started_at: new Date(),
    });

  /** Runs `meanwhile` after the reaper looked at run `id` and checked its lock, just before it writes. */
  function betweenLookAndWrite(id: string, meanwhile: () => Promise<void>): void {
    const real = transitions.transition.bind(transitions);
    let done = false;
    jest.spyOn(transitions, 'transition').mockImplementation(async (...args) => {
      if (args[0] === id && !done) {
        done = true;
        await meanwhile();
      }
      return real(...args);
    });
  }

  const reaperEvents = async (id: string) => (await runEvents(id)).filter((e) => /reaper/.test(e.reason));

  it('takes back a run whose lease expired and whose lock is gone: RETRYING, re-enqueued under a new generation', async () => {
    const id = await stuckRun();
    const before = await runRow(id);
    expect(await reaper.reapStuck()).toEqual({ retried: 1, failed: 0 });
    const row = await runRow(id);
    expect(row).toMatchObject({
      status: 'RETRYING',
      lease_owner: null,
      lease_expires_at: null,
      last_error: 'worker lost (lease expired)',
    });
    expect(row.dispatch_generation).toBe(before.dispatch_generation + 1);
    expect(await queue.getJob(runJobId(id, row.dispatch_generation))).not.toBeNull();
    expect((await reaperEvents(id)).map((e) => [e.from_status, e.to_status, e.fencing_token])).toEqual([
      ['RUNNING', 'RETRYING', '4'],
    ]);
  });

  it('fails a stuck run whose attempts are spent, with its outbox row in the same write', async () => {
    const id = await stuckRun(-1000, MAX_ATTEMPTS);
    const skipped = async () =>
      (await t.app.get(MetricsService).notifications.get()).values.find((v) => v.labels.outcome === 'skipped')?.value ??
      0;
    const skippedBefore = await skipped();
    expect(await reaper.reapStuck()).toEqual({ retried: 0, failed: 1 });
    expect(await runRow(id)).toMatchObject({ status: 'FAILED', lease_owner: null });
    const { rows } = await db().query('SELECT event_type FROM notification_logs WHERE run_id = $1', [id]);
    expect(rows).toEqual([{ event_type: 'run.failed' }]);
    expect((await reaperEvents(id)).map((e) => [e.to_status, e.reason])).toEqual([
      ['FAILED', 'reaper: worker lost and attempts spent'],
    ]);
    // No Slack URL here: the row is SKIPPED, and counted as such like any other outbox row.
    expect(await skipped()).toBe(skippedBefore + 1);
  });

  it('condition 1, lease expired: leaves a run whose lease is still live, even with its lock gone', async () => {
    // A holder that renews its lease in Postgres while Redis lost its keys (a restart) is alive.
    const id = await stuckRun(5000);
    await reaper.reapStuck();
    expect(await runRow(id)).toMatchObject({ status: 'RUNNING', lease_owner: 'dead-worker', fencing_token: '4' });
    expect(await reaperEvents(id)).toHaveLength(0);
  });

  it('condition 1 at the write: leaves a run whose lease was renewed after the reaper looked', async () => {
    const id = await stuckRun();
    betweenLookAndWrite(id, async () => {
      await db().query(`UPDATE runs SET lease_expires_at = now() + interval '5 seconds' WHERE id = $1`, [id]);
    });
    await reaper.reapStuck();
    expect(await runRow(id)).toMatchObject({ status: 'RUNNING', lease_owner: 'dead-worker', fencing_token: '4' });
    expect(await reaperEvents(id)).toHaveLength(0);
  });

  it('condition 2, lock not held: leaves a run whose Redis lock someone holds, even with its lease expired', async () => {
    const id = await stuckRun();
    const handle = await locks.acquire(runLockKey(id), 10_000);
    expect(handle).not.toBeNull();
    try {
      await reaper.reapStuck();
      expect(await runRow(id)).toMatchObject({ status: 'RUNNING', lease_owner: 'dead-worker' });
      expect(await reaperEvents(id)).toHaveLength(0);
    } finally {
      await locks.release(handle!);
    }
  });

  it('condition 3, fenced write: a newer attempt that took the run after the reaper looked is not reaped on stale facts', async () => {
    // The reaper saw attempt 2 of 3; meanwhile attempt 3 claimed the run (token 5) and died too.
    const id = await stuckRun(-1000, 2);
    betweenLookAndWrite(id, async () => {
      await db().query(
        `UPDATE runs SET attempts = 3, fencing_token = 5, lease_owner = 'second-dead-worker', lease_expires_at = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
    });
    await reaper.reapStuck();
    // On its stale look (attempts 2 < 3) it would have handed out a 4th attempt; it writes nothing.
    expect(await runRow(id)).toMatchObject({ status: 'RUNNING', attempts: 3, fencing_token: '5' });
    expect(await reaperEvents(id)).toHaveLength(0);
    // The next round sees the run as it is: attempts spent.
    await reaper.reapStuck();
    expect(await runRow(id)).toMatchObject({ status: 'FAILED', attempts: 3 });
  });

  it('condition 3 with attempts spent: a fenced FAILED write records nothing and the round goes on', async () => {
    const id = await stuckRun(-1000, MAX_ATTEMPTS);
    betweenLookAndWrite(id, async () => {
      await db().query(`UPDATE runs SET fencing_token = 5, lease_owner = 'newer-holder' WHERE id = $1`, [id]);
    });
    expect(await reaper.reapStuck()).toEqual({ retried: 0, failed: 0 });
    expect(await runRow(id)).toMatchObject({ status: 'RUNNING', fencing_token: '5' });
    expect(await reaperEvents(id)).toHaveLength(0);
  });

  it('races a real claim: a worker that takes the run between the reaper’s look and its write keeps it', async () => {
    const id = await stuckRun();
    const repo = t.app.get(RunWorkerRepository);
    const claims = new RunClaimService(
      repo,
      new ClaimBatch(t.app.get(RunClaimRepository), t.app.get(MetricsService)),
      t.config,
    );
    let claimed: { owner: string; token: number } | undefined;
    betweenLookAndWrite(id, async () => {
      // What a worker does: take the run's lock, then claim it in Postgres.
      const handle = await locks.acquire(runLockKey(id), 10_000);
      const result = await claims.claim(id, handle!.token, handle!.owner, 'worker-b');
      expect(result.kind).toBe('claimed');
      claimed = { owner: handle!.owner, token: handle!.token };
    });
    const generation = (await runRow(id)).dispatch_generation;
    await reaper.reapStuck();
    const row = await runRow(id);
    expect(row).toMatchObject({ status: 'RUNNING', attempts: 2, lease_owner: claimed!.owner });
    expect(Number(row.fencing_token)).toBeGreaterThan(4);
    expect(Number(row.lease_ms)).toBeGreaterThan(0);
    expect(row.dispatch_generation).toBe(generation);
    expect(await reaperEvents(id)).toHaveLength(0);
    expect(await queue.getJob(runJobId(id, generation + 1))).toBeNull();
    await locks.release({ key: runLockKey(id), owner: claimed!.owner });
  });
});
