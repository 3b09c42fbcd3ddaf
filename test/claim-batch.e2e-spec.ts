import { join } from 'node:path';
import type { PoolClient } from 'pg';
import { MetricsService } from '../src/metrics/metrics.service';
import { ClaimBatch } from '../src/runs/worker/claim-batch';
import { ClaimResult, RunClaimService } from '../src/runs/worker/run-claim.service';
import { RunClaimRepository } from '../src/runs/worker/run-claim.repository';
import { RunWorkerRepository } from '../src/runs/worker/run-worker.repository';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';
import { batchSizeDeltas, whileRunsLocked } from './support/pg-observe';

interface Claim {
  runId: string;
  token: number;
  owner: string;
}

/**
 * Group commit of claims: concurrent claims of one worker process share one round trip, and each
 * run is still claimed on its own conditions, with its own token, lease and event, under its
 * project's cap counted for the batch as a whole — also when one row of the batch cannot be
 * claimed and when the connection running the batch is dropped.
 */
describe('claim batches (group commit)', () => {
  const countFile = join(tempDir('cbatch'), 'executions.log');
  const TTL = 30_000;
  let t: TestApp;
  let claims: RunClaimService;

  beforeAll(async () => {
    t = await startApp(testEnv('cbatch', countFile, { APP_ROLE: 'worker', RUN_LOCK_TTL_MS: String(TTL) }));
    claims = t.app.get(RunClaimService);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  /** Round trips sent and claims they carried since the last call, from the batch-size histogram. */
  const batches = batchSizeDeltas(() => t.app.get(MetricsService).claimBatchSize, 'onceflow_claim_batch_size');
  let nextToken = 1000;
  const claimOf = (runId: string): Claim => {
    const token = nextToken++;
    return { runId, token, owner: `owner-${token}` };
  };
  const claimAll = (cs: Claim[]) => Promise.all(cs.map((c) => claims.claim(c.runId, c.token, c.owner, 'worker-c')));
  const queued = (projectId: string, n: number) =>
    Promise.all(Array.from({ length: n }, () => insertRun(projectId, { status: 'QUEUED' })));
  const liveRunning = (projectId: string) =>
    insertRun(projectId, { status: 'RUNNING', attempts: 1, fencing_token: 3, lease_owner: 'alive', leaseMs: 20_000 });

  /** The run as its own claim must have left it: RUNNING under that claim's token and owner, ONE event. */
  async function expectClaimedOnce(c: Claim, result: ClaimResult) {
    expect(result).toMatchObject({ kind: 'claimed', run: { id: c.runId, status: 'RUNNING', from_status: 'QUEUED' } });
    const row = await runRow(c.runId);
    expect(row).toMatchObject({ status: 'RUNNING', attempts: 1, fencing_token: String(c.token), lease_owner: c.owner });
    expect(Number(row.lease_ms)).toBeGreaterThan(TTL - 5000);
    expect(
      (await runEvents(c.runId)).map((e) => [
        e.from_status,
        e.to_status,
        e.attempt,
        e.fencing_token,
        e.worker_id,
        e.reason,
      ]),
    ).toEqual([['QUEUED', 'RUNNING', 1, String(c.token), 'worker-c', 'claimed']]);
  }

  async function expectUntouched(runId: string, status: string) {
    expect(await runRow(runId)).toMatchObject({ status, attempts: status === 'QUEUED' ? 0 : 1 });
    expect(await runEvents(runId)).toHaveLength(0);
  }

  const capped = { kind: 'later', reason: 'project at max_concurrent_runs' };

  it('40 concurrent claims share fewer round trips than runs, and each run is claimed once with its own token', async () => {
    const project = await insertProject(40);
    const cs = (await queued(project.id, 40)).map(claimOf);
    await batches();
    const results = await claimAll(cs);
    const seen = await batches();
    expect(seen.rows).toBe(40);
    expect(seen.statements).toBeLessThan(40);
    for (const [i, c] of cs.entries()) {
      await expectClaimedOnce(c, results[i]);
      expect(results[i]).toMatchObject({ project: { id: project.id, name: project.name } });
    }
  });

  it('the cap holds for the batch as a whole: cap 3 with one live run lets exactly 2 of 10 in', async () => {
    const project = await insertProject(3);
    await liveRunning(project.id);
    const cs = (await queued(project.id, 10)).map(claimOf);
    await batches();
    const results = await claimAll(cs);
    expect(await batches()).toEqual({ statements: 1, rows: 10 });
    expect(results.filter((r) => r.kind === 'claimed')).toHaveLength(2);
    expect(results.filter((r) => r.kind !== 'claimed')).toEqual(
      Array.from({ length: 8 }, () => expect.objectContaining(capped)),
    );
    for (const [i, c] of cs.entries())
      if (results[i].kind === 'claimed') await expectClaimedOnce(c, results[i]);
      else await expectUntouched(c.runId, 'QUEUED');
  });

  it('batches of two processes racing for the same projects never exceed either cap', async () => {
    // A second batcher over the same repository: its round trips run beside this one's, on their
    // own connections, as another worker process's would.
    const repo = t.app.get(RunWorkerRepository);
    const elsewhere = new RunClaimService(
      repo,
      new ClaimBatch(t.app.get(RunClaimRepository), t.app.get(MetricsService)),
      t.config,
    );
    for (let round = 0; round < 5; round++) {
      const [a, b] = [await insertProject(2), await insertProject(3)];
      const cs = [...(await queued(a.id, 6)), ...(await queued(b.id, 6))].map(claimOf);
      const results = await Promise.all(
        cs.map((c, i) => (i % 2 ? elsewhere : claims).claim(c.runId, c.token, c.owner, 'worker-c')),
      );
      const claimedIn = (projectId: string) =>
        results.filter((r) => r.kind === 'claimed' && r.project.id === projectId).length;
      expect([claimedIn(a.id), claimedIn(b.id)]).toEqual([2, 3]);
    }
  });

  it('two projects in one batch each keep their own cap', async () => {
    const two = await insertProject(2);
    const four = await insertProject(4);
    await liveRunning(four.id);
    const cs = [...(await queued(two.id, 6)), ...(await queued(four.id, 6))].map(claimOf);
    await batches();
    const results = await claimAll(cs);
    expect(await batches()).toEqual({ statements: 1, rows: 12 });
    const claimedIn = (projectId: string) =>
      results.filter((r) => r.kind === 'claimed' && r.project.id === projectId).length;
    expect([claimedIn(two.id), claimedIn(four.id)]).toEqual([2, 3]);
    expect(results.filter((r) => r.kind === 'later')).toHaveLength(7);
  });

  it('a batch with a live-leased run and a cancelled run: only those two are refused, the others claimed', async () => {
    const project = await insertProject(10);
    const held = await liveRunning(project.id);
    const cancelled = await insertRun(project.id, { status: 'CANCELLED', attempts: 1 });
    const rest = (await queued(project.id, 4)).map(claimOf);
    const cs = [claimOf(held), claimOf(cancelled), ...rest];
    await batches();
    const results = await claimAll(cs);
    expect(await batches()).toEqual({ statements: 1, rows: 6 });
    expect(results[0]).toMatchObject({ kind: 'later', reason: 'held by a live lease' });
    expect(results[1]).toEqual({ kind: 'skip', reason: 'run is CANCELLED' });
    expect(await runRow(held)).toMatchObject({ attempts: 1, fencing_token: '3', lease_owner: 'alive' });
    expect(await runEvents(held)).toHaveLength(0);
    await expectUntouched(cancelled, 'CANCELLED');
    for (const [i, c] of rest.entries()) await expectClaimedOnce(c, results[i + 2]);
  });

  it('a live-leased run of the batch still takes its slot of the cap', async () => {
    const project = await insertProject(3);
    const held = await liveRunning(project.id);
    const cs = [claimOf(held), ...(await queued(project.id, 3)).map(claimOf)];
    await batches();
    const results = await claimAll(cs);
    expect(await batches()).toEqual({ statements: 1, rows: 4 });
    expect(results[0]).toMatchObject({ kind: 'later', reason: 'held by a live lease' });
    expect(results.filter((r) => r.kind === 'claimed')).toHaveLength(2);
    expect(results.slice(1).filter((r) => r.kind === 'later')).toEqual([expect.objectContaining(capped)]);
  });

  it('runs of the batch that cannot be claimed take no slot of the cap from those that can', async () => {
    const project = await insertProject(2);
    // The cap ranks a project's candidates by id: these finished runs sort before the queued ones.
    const finished = await Promise.all(
      ['SUCCESS', 'FAILED', 'CANCELLED'].map(async (status) => {
        const id = await insertRun(project.id, { status, attempts: 1 });
        const first = `00000000${id.slice(8)}`;
        await db().query('UPDATE runs SET id = $2 WHERE id = $1', [id, first]);
        return first;
      }),
    );
    const cs = [...finished.map(claimOf), ...(await queued(project.id, 2)).map(claimOf)];
    await batches();
    const results = await claimAll(cs);
    expect(await batches()).toEqual({ statements: 1, rows: 5 });
    expect(results.slice(0, 3).map((r) => r.kind)).toEqual(['skip', 'skip', 'skip']);
    await expectClaimedOnce(cs[3], results[3]);
    await expectClaimedOnce(cs[4], results[4]);
  });

  it('two claims of one run at once go to separate round trips: one claims it, the other finds it held', async () => {
    const project = await insertProject(5);
    const [id, other] = await queued(project.id, 2);
    const [first, second, third] = [claimOf(id), claimOf(id), claimOf(other)];
    await batches();
    const results = await claimAll([first, second, third]);
    expect(await batches()).toEqual({ statements: 2, rows: 3 });
    // The two round trips race for the project's lock: either claim may win, never both.
    const won = results[0].kind === 'claimed' ? 0 : 1;
    await expectClaimedOnce([first, second][won], results[won]);
    expect(results[1 - won]).toMatchObject({ kind: 'later', reason: 'held by a live lease' });
    await expectClaimedOnce(third, results[2]);
  });

  it('a row the database refuses fails only its own caller; the rest of its batch is claimed', async () => {
    const project = await insertProject(5);
    const cs = (await queued(project.id, 4)).map(claimOf);
    // A token past bigint is refused (22003): a bug in that one row, not in the batch.
    cs[1].token = 1e19;
    await batches();
    const results = await Promise.allSettled(cs.map((c) => claims.claim(c.runId, c.token, c.owner, 'worker-c')));
    expect(await batches()).toEqual({ statements: 5, rows: 8 });
    expect(results[1]).toMatchObject({
      status: 'rejected',
      reason: expect.objectContaining({ code: '22003' }),
    });
    await expectUntouched(cs[1].runId, 'QUEUED');
    for (const i of [0, 2, 3]) {
      const r = results[i];
      if (r.status !== 'fulfilled') throw new Error(`claim ${i} failed: ${String(r.reason)}`);
      await expectClaimedOnce(cs[i], r.value);
    }
  });

  /**
   * Holds the row locks of the claims' runs so that their batch waits inside its round trip, calls
   * `meanwhile` with the holding transaction (then still open, the batch's backend given), and
   * answers each claim's outcome once the locks are released.
   */
  async function batchWaitingForRowLocks(cs: Claim[], meanwhile: (tx: PoolClient, pid: number) => Promise<void>) {
    return whileRunsLocked(
      cs.map((c) => c.runId),
      () => Promise.allSettled(cs.map((c) => claims.claim(c.runId, c.token, c.owner, 'worker-c'))),
      async (tx, pid) => {
        expect(await batches()).toEqual({ statements: 1, rows: cs.length });
        await meanwhile(tx, pid);
      },
    );
  }

  it('runs taken or cancelled while the batch waited for their row locks are judged as they are then', async () => {
    const project = await insertProject(10);
    const cs = (await queued(project.id, 5)).map(claimOf);
    const [taken, cancelled] = cs.map((c) => c.runId);
    await batches();
    const outcomes = await batchWaitingForRowLocks(cs, async (tx) => {
      await tx.query(
        `UPDATE runs SET status = 'RUNNING', attempts = 1, fencing_token = 50, lease_owner = 'other',
                lease_expires_at = now() + interval '20 seconds' WHERE id = $1`,
        [taken],
      );
      await tx.query(`UPDATE runs SET status = 'CANCELLED' WHERE id = $1`, [cancelled]);
    });
    const results = outcomes.map((o) => (o.status === 'fulfilled' ? o.value : { kind: 'error', err: o.reason }));
    expect(results[0]).toMatchObject({ kind: 'later', reason: 'held by a live lease' });
    expect(await runRow(taken)).toMatchObject({ attempts: 1, fencing_token: '50', lease_owner: 'other' });
    expect(results[1]).toEqual({ kind: 'skip', reason: 'run is CANCELLED' });
    for (const id of [taken, cancelled]) expect(await runEvents(id)).toHaveLength(0);
    for (const i of [2, 3, 4]) await expectClaimedOnce(cs[i], results[i] as ClaimResult);
  });

  it('a run whose lease had expired, re-taken with a live lease while the batch waited, is left to its new owner', async () => {
    const project = await insertProject(10);
    const expired = await insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 3,
      lease_owner: 'gone',
      leaseMs: -5_000,
    });
    const cs = [expired, ...(await queued(project.id, 3))].map(claimOf);
    await batches();
    // Same status as the batch's snapshot saw (RUNNING): only the lease condition, checked again
    // under the row lock, tells the batch that the run is held now.
    const outcomes = await batchWaitingForRowLocks(cs, async (tx) => {
      await tx.query(
        `UPDATE runs SET attempts = 2, fencing_token = 60, lease_owner = 'other',
                lease_expires_at = now() + interval '20 seconds' WHERE id = $1`,
        [expired],
      );
    });
    const results = outcomes.map((o) => (o.status === 'fulfilled' ? o.value : { kind: 'error', err: o.reason }));
    expect(results[0]).toMatchObject({ kind: 'later', reason: 'held by a live lease' });
    expect(await runRow(expired)).toMatchObject({ attempts: 2, fencing_token: '60', lease_owner: 'other' });
    expect(await runEvents(expired)).toHaveLength(0);
    for (const i of [1, 2, 3]) await expectClaimedOnce(cs[i], results[i] as ClaimResult);
  });

  it('a connection dropped mid-batch: every caller gets the error, and the retries claim each run exactly once', async () => {
    const project = await insertProject(10);
    const ids = await queued(project.id, 10);
    await batches();
    const outcomes = await batchWaitingForRowLocks(ids.map(claimOf), async (_tx, pid) => {
      await db().query('SELECT pg_terminate_backend($1)', [pid]);
    });
    for (const o of outcomes)
      expect(o).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ code: '57P01' }) });
    for (const id of ids) await expectUntouched(id, 'QUEUED');
    // The processor retries a job after an infrastructure error; the retry takes the run lock
    // again, so it claims under a newer token.
    const retries = ids.map(claimOf);
    const results = await claimAll(retries);
    for (const [i, c] of retries.entries()) await expectClaimedOnce(c, results[i]);
    const tokens = (await Promise.all(ids.map(runRow))).map((r) => r.fencing_token);
    expect(new Set(tokens).size).toBe(ids.length);
  });
});
