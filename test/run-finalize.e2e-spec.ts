import { getDataSourceToken } from '@nestjs/typeorm';
import { join } from 'node:path';
import type { PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { FinalizeRequest, RunFinalizer } from '../src/runs/worker/run-finalizer';
import { renderText } from '../src/runs/worker/run-message';
import { RunStatus } from '../src/runs/run-status';
import { RunTransitionsRepository } from '../src/runs/run-transitions.repository';
import { IllegalTransitionError } from '../src/runs/run-state-machine';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';
import { whileRunsLocked } from './support/pg-observe';

/** The fenced finalize, the hand-over and the transition statement under them, on prepared rows. */
describe('RunFinalizer and RunTransitionsRepository', () => {
  const countFile = join(tempDir('finalize'), 'executions.log');
  let t: TestApp;
  let finalizer: RunFinalizer;
  let transitions: RunTransitionsRepository;
  let project: { id: string; name: string };

  beforeAll(async () => {
    // Worker role (the finalizer lives there); no Slack URL, so outbox rows are SKIPPED and stay put.
    t = await startApp(testEnv('finalize', countFile, { APP_ROLE: 'worker' }));
    finalizer = t.app.get(RunFinalizer);
    transitions = t.app.get(RunTransitionsRepository);
    project = await insertProject();
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const running = (requirement = 'build it') =>
    insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 7,
      lease_owner: 'me',
      leaseMs: 5000,
      requirement,
      started_at: new Date(),
    });
  const request = (runId: string, to: FinalizeRequest['to'], token = '7'): FinalizeRequest => ({
    runId,
    token,
    to,
    projectName: project.name,
    requirement: '\n  first line  \nsecond',
    outputTail: 'tail of output',
    lastError: to === RunStatus.SUCCESS ? null : 'exit 3',
    reason: `finished ${to}`,
    workerId: 'worker-f',
  });
  const outbox = async (runId: string) =>
    (await db().query('SELECT * FROM notification_logs WHERE run_id = $1', [runId])).rows;

  it.each([
    [RunStatus.SUCCESS, 'run.succeeded'],
    [RunStatus.FAILED, 'run.failed'],
  ] as const)('%s with the current token: the row, its event and ONE outbox row, in one go', async (to, eventType) => {
    const id = await running();
    const result = await finalizer.finalize(request(id, to));
    expect(result).toMatchObject({ kind: 'written', row: { id, status: to, from_status: 'RUNNING' } });
    const row = await runRow(id);
    expect(row).toMatchObject({
      status: to,
      output_tail: 'tail of output',
      last_error: request(id, to).lastError,
      lease_owner: null,
      lease_expires_at: null,
    });
    expect(row.finished_at).not.toBeNull();
    expect((await runEvents(id)).map((e) => [e.from_status, e.to_status, e.reason, e.worker_id])).toEqual([
      ['RUNNING', to, `finished ${to}`, 'worker-f'],
    ]);
    const rows = await outbox(id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      id: (result as { notificationId: string }).notificationId,
      event_type: eventType,
      status: 'SKIPPED',
    });
    expect(rows[0].message.text).toBe(renderText(id, project.name, to, request(id, to).requirement));
  });

  it('RETRYING: the lease is freed, the run is not finished, and no outbox row', async () => {
    const id = await running();
    const result = await finalizer.finalize(request(id, RunStatus.RETRYING));
    expect(result).toMatchObject({ kind: 'written', notificationId: null });
    expect(await runRow(id)).toMatchObject({
      status: 'RETRYING',
      finished_at: null,
      lease_owner: null,
      last_error: 'exit 3',
    });
    expect(await outbox(id)).toHaveLength(0);
  });

  it('a stale token writes nothing at all', async () => {
    const id = await running();
    expect(await finalizer.finalize(request(id, RunStatus.SUCCESS, '6'))).toEqual({ kind: 'fenced' });
    expect(await runRow(id)).toMatchObject({ status: 'RUNNING', lease_owner: 'me', output_tail: null });
    expect(await runEvents(id)).toHaveLength(0);
    expect(await outbox(id)).toHaveLength(0);
  });

  it('a second finalize of the same attempt writes nothing more', async () => {
    const id = await running();
    expect((await finalizer.finalize(request(id, RunStatus.SUCCESS))).kind).toBe('written');
    expect(await finalizer.finalize(request(id, RunStatus.FAILED))).toEqual({ kind: 'fenced' });
    expect(await runRow(id)).toMatchObject({ status: 'SUCCESS' });
    expect(await outbox(id)).toHaveLength(1);
  });

  it('handOver: RETRYING without counting the interrupted attempt; only with the current token', async () => {
    const id = await running();
    expect(await finalizer.handOver(id, '6', 'worker-f')).toBe(false);
    expect(await finalizer.handOver(id, '7', 'worker-f')).toBe(true);
    expect(await runRow(id)).toMatchObject({
      status: 'RETRYING',
      attempts: 0,
      lease_owner: null,
      lease_expires_at: null,
    });
    const events = await runEvents(id);
    expect(events.map((e) => [e.to_status, e.reason, e.worker_id])).toEqual([
      ['RETRYING', 'worker shutting down: handed over', 'worker-f'],
    ]);
    const zero = await insertRun(project.id, { status: 'RUNNING', attempts: 0, fencing_token: 2 });
    expect(await finalizer.handOver(zero, '2', 'w')).toBe(true);
    expect((await runRow(zero)).attempts).toBe(0);
  });

  it('transition(): the statuses, the token, the extra condition and the caller’s transaction all bind', async () => {
    const id = await insertRun(project.id, { status: 'QUEUED', fencing_token: 3 });
    await expect(transitions.transition(id, { to: RunStatus.SUCCESS, from: [RunStatus.QUEUED] })).rejects.toThrow(
      IllegalTransitionError,
    );
    expect(await transitions.transition(id, { to: RunStatus.CANCELLED, from: [RunStatus.PENDING] })).toBeNull();
    expect(
      await transitions.transition(id, { to: RunStatus.CANCELLED, from: [RunStatus.QUEUED], fencingToken: '2' }),
    ).toBeNull();
    expect(
      await transitions.transition(id, {
        to: RunStatus.CANCELLED,
        from: [RunStatus.QUEUED],
        where: 'r.attempts > :minAttempts',
        values: { minAttempts: 0 },
      }),
    ).toBeNull();
    const ds = t.app.get<DataSource>(getDataSourceToken());
    await expect(
      ds.transaction(async (em) => {
        expect(
          await transitions.transition(id, { to: RunStatus.CANCELLED, from: [RunStatus.QUEUED] }, em),
        ).not.toBeNull();
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await runRow(id)).toMatchObject({ status: 'QUEUED' });
    expect(await runEvents(id)).toHaveLength(0);
    const row = await transitions.transition(id, {
      to: RunStatus.CANCELLED,
      from: [RunStatus.PENDING, RunStatus.QUEUED],
      fencingToken: '3',
      where: 'r.attempts = :attempts',
      values: { attempts: 0, lastError: 'why' },
      set: ['last_error = :lastError'],
      workerId: 'w-t',
      reason: 'test',
    });
    expect(row).toMatchObject({ id, status: 'CANCELLED', from_status: 'QUEUED', last_error: 'why' });
    expect(await runEvents(id)).toEqual([
      expect.objectContaining({
        from_status: 'QUEUED',
        to_status: 'CANCELLED',
        fencing_token: '3',
        worker_id: 'w-t',
        reason: 'test',
      }),
    ]);
  });

  /**
   * A connection error under the finalize, made deterministic: the test holds the run's row lock,
   * the finalize's UPDATE waits for it, and exactly that waiting backend is terminated (57P01).
   * What happens to the row in the meantime decides which way the retry goes.
   */
  async function finalizeThroughAConnectionError(
    id: string,
    meanwhile: (tx: PoolClient) => Promise<void>,
    to: FinalizeRequest['to'] = RunStatus.SUCCESS,
  ) {
    return whileRunsLocked(
      [id],
      () => finalizer.finalize(request(id, to)),
      async (tx, pid) => {
        await db().query('SELECT pg_terminate_backend($1)', [pid]);
        await meanwhile(tx);
      },
    );
  }

  it('retries a finalize cut off by a connection error, and writes it once', async () => {
    const id = await running();
    const result = await finalizeThroughAConnectionError(id, async () => undefined);
    // Written by the retry itself (not read back): the row as the transition returned it.
    expect(result).toMatchObject({ kind: 'written', row: { status: 'SUCCESS', from_status: 'RUNNING' } });
    expect(await runRow(id)).toMatchObject({ status: 'SUCCESS', output_tail: 'tail of output' });
    expect(await runEvents(id)).toHaveLength(1);
    expect(await outbox(id)).toHaveLength(1);
  });

  it('after a connection error, finds its own earlier commit and answers written (the commit’s answer was lost)', async () => {
    const id = await running();
    const result = await finalizeThroughAConnectionError(id, async (tx) => {
      // As if the first attempt had committed before its answer was lost.
      await tx.query(
        `UPDATE runs SET status = 'SUCCESS', lease_owner = NULL, lease_expires_at = NULL, finished_at = now() WHERE id = $1`,
        [id],
      );
      await tx.query(
        `INSERT INTO notification_logs (run_id, event_type, channel, status, message) VALUES ($1, 'run.succeeded', 'slack', 'SKIPPED', '{}')`,
        [id],
      );
    });
    const note = (await outbox(id))[0];
    expect(result).toMatchObject({
      kind: 'written',
      row: { id, status: 'SUCCESS', fencing_token: '7' },
      notificationId: note.id,
    });
  });

  it('after a connection error, finds its own earlier RETRYING commit (no notification to name)', async () => {
    const id = await running();
    const result = await finalizeThroughAConnectionError(
      id,
      async (tx) =>
        void (await tx.query(
          `UPDATE runs SET status = 'RETRYING', lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`,
          [id],
        )),
      RunStatus.RETRYING,
    );
    expect(result).toMatchObject({ kind: 'written', row: { id, status: 'RETRYING' }, notificationId: null });
  });

  it('does not retry an error that is not a connection error: it surfaces at once', async () => {
    const id = await running();
    // Postgres refuses a NUL byte in text (22021): a bug, not a blip; retrying would loop forever.
    await expect(
      finalizer.finalize({ ...request(id, RunStatus.SUCCESS), outputTail: 'bad \u0000 byte' }),
    ).rejects.toThrow(/0x00/);
    expect(await runRow(id)).toMatchObject({ status: 'RUNNING' });
  });

  it('after a connection error, a newer holder’s write is not taken for ours', async () => {
    const id = await running();
    const result = await finalizeThroughAConnectionError(id, async (tx) => {
      await tx.query(`UPDATE runs SET status = 'SUCCESS', fencing_token = 8 WHERE id = $1`, [id]);
    });
    expect(result).toEqual({ kind: 'fenced' });
    const retrying = await running();
    const other = await finalizeThroughAConnectionError(
      retrying,
      async (tx) => void (await tx.query(`UPDATE runs SET status = 'FAILED' WHERE id = $1`, [retrying])),
      RunStatus.RETRYING,
    );
    expect(other).toEqual({ kind: 'fenced' });
  });
});
