import { join } from 'node:path';
import type { PoolClient } from 'pg';
import { MetricsService } from '../src/metrics/metrics.service';
import { RunStatus } from '../src/runs/run-status';
import { FINALIZE_BATCH_MAX } from '../src/runs/worker/finalize-batch';
import { FinalizeRequest, FinalizeResult, RunFinalizer } from '../src/runs/worker/run-finalizer';
import { renderText } from '../src/runs/worker/run-message';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';
import { batchSizeDeltas, whileRunsLocked } from './support/pg-observe';

/**
 * Group commit of finalizes: concurrent finalizes of one worker process share one statement, and
 * each run is still fenced, written once and answered on its own — also when one row of the
 * batch is fenced out, when one row is bad, and when the connection running the batch is dropped.
 */
describe('finalize batches (group commit)', () => {
  const countFile = join(tempDir('fbatch'), 'executions.log');
  let t: TestApp;
  let finalizer: RunFinalizer;
  let project: { id: string; name: string };

  beforeAll(async () => {
    t = await startApp(testEnv('fbatch', countFile, { APP_ROLE: 'worker' }));
    finalizer = t.app.get(RunFinalizer);
    project = await insertProject();
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const running = () =>
    insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 7,
      lease_owner: 'me',
      leaseMs: 60_000,
      started_at: new Date(),
    });
  const request = (
    runId: string,
    to: FinalizeRequest['to'],
    extra: Partial<FinalizeRequest> = {},
  ): FinalizeRequest => ({
    runId,
    token: '7',
    to,
    projectName: project.name,
    requirement: `requirement of ${runId}`,
    outputTail: `tail of ${runId}`,
    lastError: to === RunStatus.SUCCESS ? null : `error of ${runId}`,
    reason: `finished ${runId}`,
    workerId: 'worker-b',
    ...extra,
  });
  const outbox = async (runId: string) =>
    (await db().query('SELECT * FROM notification_logs WHERE run_id = $1', [runId])).rows;
  /** Statements sent and rows they carried since the last call, from the batch-size histogram. */
  const batches = batchSizeDeltas(() => t.app.get(MetricsService).finalizeBatchSize, 'onceflow_finalize_batch_size');
  const outcomes = [RunStatus.SUCCESS, RunStatus.FAILED, RunStatus.RETRYING] as const;

  /** The run as its own finalize must have left it: its outcome, ONE event, its outbox row if terminal. */
  async function expectWrittenOnce(req: FinalizeRequest, result: FinalizeResult) {
    const terminal = req.to !== RunStatus.RETRYING;
    const row = await runRow(req.runId);
    expect(row).toMatchObject({
      status: req.to,
      output_tail: req.outputTail,
      last_error: req.lastError,
      lease_owner: null,
      lease_expires_at: null,
    });
    expect(row.finished_at === null).toBe(!terminal);
    expect(
      (await runEvents(req.runId)).map((e) => [
        e.from_status,
        e.to_status,
        e.attempt,
        e.fencing_token,
        e.worker_id,
        e.reason,
      ]),
    ).toEqual([['RUNNING', req.to, 1, '7', 'worker-b', req.reason]]);
    const notes = await outbox(req.runId);
    expect(notes).toHaveLength(terminal ? 1 : 0);
    expect(result).toMatchObject({
      kind: 'written',
      row: { id: req.runId, status: req.to, from_status: 'RUNNING' },
      notificationId: terminal ? notes[0].id : null,
    });
    if (terminal)
      expect(notes[0]).toMatchObject({
        event_type: req.to === RunStatus.SUCCESS ? 'run.succeeded' : 'run.failed',
        channel: 'slack',
        status: 'SKIPPED',
        message: { text: renderText(req.runId, project.name, req.to, req.requirement) },
      });
  }

  async function expectUntouched(runId: string, status = 'RUNNING') {
    expect(await runRow(runId)).toMatchObject({ status, fencing_token: '7', output_tail: null, last_error: null });
    expect(await runEvents(runId)).toHaveLength(0);
    expect(await outbox(runId)).toHaveLength(0);
  }

  it('50 concurrent finalizes share a few statements, and each run gets exactly its own outcome', async () => {
    const ids = await Promise.all(Array.from({ length: 50 }, () => running()));
    const reqs = ids.map((id, i) => request(id, outcomes[i % 3]));
    await batches();
    const results = await Promise.all(reqs.map((r) => finalizer.finalize(r)));
    const seen = await batches();
    expect(seen.rows).toBe(50);
    expect(seen.statements).toBe(Math.ceil(50 / FINALIZE_BATCH_MAX));
    for (const [i, req] of reqs.entries()) await expectWrittenOnce(req, results[i]);
  });

  it('a batch with a stale token and a cancelled run: those two are fenced, the others written', async () => {
    const ids = await Promise.all(Array.from({ length: 6 }, () => running()));
    const [stale, cancelled, ...rest] = ids;
    await db().query(`UPDATE runs SET status = 'CANCELLED', lease_owner = NULL WHERE id = $1`, [cancelled]);
    const reqs = [
      request(stale, RunStatus.SUCCESS, { token: '6' }),
      request(cancelled, RunStatus.FAILED),
      ...rest.map((id, i) => request(id, outcomes[i % 3])),
    ];
    await batches();
    const results = await Promise.all(reqs.map((r) => finalizer.finalize(r)));
    expect(await batches()).toEqual({ statements: 1, rows: 6 });
    expect(results.slice(0, 2)).toEqual([{ kind: 'fenced' }, { kind: 'fenced' }]);
    await expectUntouched(stale);
    expect(await runRow(stale)).toMatchObject({ lease_owner: 'me' });
    await expectUntouched(cancelled, 'CANCELLED');
    for (const [i, req] of reqs.entries()) if (i >= 2) await expectWrittenOnce(req, results[i]);
  });

  it('two finalizes of one run at once go to separate statements: one is written, the other fenced', async () => {
    const id = await running();
    const other = await running();
    await batches();
    const [first, second, third] = await Promise.all([
      finalizer.finalize(request(id, RunStatus.SUCCESS)),
      finalizer.finalize(request(id, RunStatus.FAILED)),
      finalizer.finalize(request(other, RunStatus.SUCCESS)),
    ]);
    expect(await batches()).toEqual({ statements: 2, rows: 3 });
    await expectWrittenOnce(request(id, RunStatus.SUCCESS), first);
    expect(second).toEqual({ kind: 'fenced' });
    await expectWrittenOnce(request(other, RunStatus.SUCCESS), third);
  });

  it('a row the database refuses fails only its own caller; the rest of its batch is written', async () => {
    const ids = await Promise.all(Array.from({ length: 4 }, () => running()));
    // Postgres refuses a NUL byte in text (22021): a bug in that one row, not in the batch.
    const reqs = ids.map((id, i) => request(id, outcomes[i % 3], i === 1 ? { outputTail: 'bad \u0000 byte' } : {}));
    await batches();
    const results = await Promise.allSettled(reqs.map((r) => finalizer.finalize(r)));
    expect(await batches()).toEqual({ statements: 5, rows: 8 });
    expect(results[1]).toMatchObject({
      status: 'rejected',
      reason: expect.objectContaining({ message: expect.stringMatching(/0x00/) }),
    });
    await expectUntouched(ids[1]);
    for (const i of [0, 2, 3]) {
      const r = results[i];
      if (r.status !== 'fulfilled') throw new Error(`run ${i} failed: ${String(r.reason)}`);
      await expectWrittenOnce(reqs[i], r.value);
    }
  });

  /**
   * Holds the row locks of the batch's runs so that its statement waits, terminates exactly that
   * waiting backend (57P01), lets `meanwhile` change rows under those locks, then releases them:
   * the retries cannot run before.
   */
  async function batchThroughAConnectionError(reqs: FinalizeRequest[], meanwhile: (tx: PoolClient) => Promise<void>) {
    return whileRunsLocked(
      reqs.map((r) => r.runId),
      () => Promise.all(reqs.map((r) => finalizer.finalize(r))),
      async (tx, pid) => {
        expect(await batches()).toEqual({ statements: 1, rows: reqs.length });
        await db().query('SELECT pg_terminate_backend($1)', [pid]);
        await meanwhile(tx);
      },
    );
  }

  it('a connection dropped mid-batch: every caller retries, and each run is written exactly once', async () => {
    const ids = await Promise.all(Array.from({ length: 10 }, () => running()));
    const reqs = ids.map((id, i) => request(id, outcomes[i % 3]));
    await batches();
    const results = await batchThroughAConnectionError(reqs, async () => undefined);
    // The retries were sent as well (all ten rows again, in however many statements).
    expect((await batches()).rows).toBe(10);
    for (const [i, req] of reqs.entries()) await expectWrittenOnce(req, results[i]);
  });

  it('after a dropped batch, each run is settled on its own: its commit found, or a newer holder’s write', async () => {
    const ids = await Promise.all(Array.from({ length: 5 }, () => running()));
    const reqs = ids.map((id) => request(id, RunStatus.SUCCESS));
    const [landed, overtaken] = ids;
    await batches();
    const results = await batchThroughAConnectionError(reqs, async (tx) => {
      // As if the batch had committed `landed` before its answer was lost, while a newer holder
      // (token 8) finished `overtaken`.
      await tx.query(
        `UPDATE runs SET status = 'SUCCESS', lease_owner = NULL, lease_expires_at = NULL, finished_at = now() WHERE id = $1`,
        [landed],
      );
      await tx.query(
        `INSERT INTO notification_logs (run_id, event_type, channel, status, message) VALUES ($1, 'run.succeeded', 'slack', 'SKIPPED', '{}')`,
        [landed],
      );
      await tx.query(`UPDATE runs SET status = 'FAILED', fencing_token = 8 WHERE id = $1`, [overtaken]);
    });
    expect(results[0]).toMatchObject({
      kind: 'written',
      row: { id: landed, status: 'SUCCESS' },
      notificationId: (await outbox(landed))[0].id,
    });
    expect(results[1]).toEqual({ kind: 'fenced' });
    expect(await runRow(overtaken)).toMatchObject({ status: 'FAILED', fencing_token: '8', output_tail: null });
    for (const i of [2, 3, 4]) await expectWrittenOnce(reqs[i], results[i]);
  });
});
