import type { ExecutionResult } from '../src/runs/executor/executor';
import { RetryLaterError } from '../src/locks/retry-later.error';
import { RunAttempts } from '../src/runs/steps/run-attempts';
import { db, waitFor } from './support/app';
import { MAX_ATTEMPTS, TIMEOUT_MS, TTL_MS, processorHarness } from './support/processor-harness';
import { runRow } from './support/run-rows';

/**
 * RunProcessor.handle called directly, under a real run lock and a real claim, with an executor
 * the test scripts (test/support/processor-harness.ts): what the executor is asked to do, how each
 * way an attempt can end is written to Postgres (status, reason, last error), what the handler
 * answers Bull. The lease's side (aborts, cancels, beats, shutdown) is in run-processor-lease.e2e.
 * Runs that end by the real shell command are in executor.e2e and retries.e2e.
 */
describe('RunProcessor: from an attempt’s end to the run’s row', () => {
  const h = processorHarness('processor');
  beforeAll(h.start);
  afterEach(h.reset);
  afterAll(h.stop);

  it('asks the executor for the claimed attempt: its data, the timeout, a watchdog deadline within 0.8 × the lock TTL, the project’s workspace', async () => {
    const { runId, projectId, workspace } = await h.queuedRun({ attempts: 1 });
    let guardIn = NaN;
    h.behaviour = async (req) => {
      guardIn = req.guardUntil!() - Date.now();
      return {};
    };
    expect(await h.attempt(runId)).toEqual({ result: 'succeeded' });
    const req = h.requests.find((r) => r.runId === runId)!;
    const row = await runRow(runId);
    expect(req).toMatchObject({
      runId,
      attempt: 2,
      fencingToken: String(row.fencing_token),
      requirement: row.requirement,
      projectId,
      projectWorkspace: workspace,
      taskId: null,
      workspace,
      idempotencyKey: `onceflow-run-${runId}`,
      timeoutMs: TIMEOUT_MS,
      guardUntil: expect.any(Function),
      runApi: undefined,
    });
    // Counted from when the lock was asked for (the claim took some of it), never from now.
    expect(guardIn).toBeGreaterThan(0);
    expect(guardIn).toBeLessThanOrEqual(TTL_MS * 0.8);
    expect(row).toMatchObject({ status: 'SUCCESS', attempts: 2, last_error: null, lease_owner: null });
    expect((await h.lastEvent(runId)).reason).toBe('exit 0');
  });

  it('gives a command that calls back into the worker a credential for this attempt only, and its step counts in the reason', async () => {
    const { runId } = await h.queuedRun();
    const attempts = h.t.app.get(RunAttempts);
    h.runApi = true;
    h.behaviour = async (req) => {
      const grant = attempts.resolve(req.runApi?.env.ONCEFLOW_RUN_TOKEN);
      expect(grant).toMatchObject({ runId });
      grant!.stats.executed = 2;
      grant!.stats.replayed = 1;
      return {};
    };
    expect(await h.attempt(runId)).toEqual({ result: 'succeeded' });
    const req = h.requests.find((r) => r.runId === runId)!;
    // Revoked with the attempt: a command left running cannot use it any more.
    expect(attempts.resolve(req.runApi!.env.ONCEFLOW_RUN_TOKEN)).toBeUndefined();
    expect((await h.lastEvent(runId)).reason).toBe('exit 0; steps: 2 run, 1 replayed');
  });

  it.each([
    ['an exit status', { outcome: 'failed', exitCode: 3 }, 'exit 3'],
    ['a signal it did not survive', { outcome: 'failed', exitCode: null, signal: 'SIGTERM' }, 'killed by SIGTERM'],
    [
      'the timeout',
      { outcome: 'failed', exitCode: null, signal: 'SIGKILL', timedOut: true },
      `timed out after ${TIMEOUT_MS} ms`,
    ],
    [
      'a command that could not start',
      { outcome: 'failed', exitCode: null, startError: 'spawn E2BIG' },
      'could not start the command: spawn E2BIG',
    ],
  ] as Array<[string, Partial<ExecutionResult>, string]>)(
    'a failed attempt (%s) is FAILED with what ended it',
    async (_what, result, text) => {
      const { runId } = await h.queuedRun();
      h.behaviour = async () => result;
      expect(await h.attempt(runId)).toEqual({ result: 'failed' });
      expect(await runRow(runId)).toMatchObject({ status: 'FAILED', attempts: 1, last_error: text });
      expect((await h.lastEvent(runId)).reason).toBe(text);
    },
  );

  it('a transient attempt with attempts left is RETRYING, and Bull is told to come back after the backoff', async () => {
    const { runId } = await h.queuedRun({ attempts: MAX_ATTEMPTS - 2 });
    h.behaviour = async () => ({ outcome: 'transient', exitCode: 75 });
    const { error } = await h.attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    const delay = (error as RetryLaterError).retryDelayMs;
    expect(delay).toBeGreaterThan(0);
    expect(delay).toBeLessThanOrEqual(100);
    expect(await runRow(runId)).toMatchObject({
      status: 'RETRYING',
      attempts: MAX_ATTEMPTS - 1,
      last_error: 'exit 75',
    });
    expect((await h.lastEvent(runId)).reason).toBe(`exit 75 (transient); retry in ${delay} ms`);
  });

  it('a transient attempt that was the last one is FAILED, and says the attempts are spent', async () => {
    const { runId } = await h.queuedRun({ attempts: MAX_ATTEMPTS - 1 });
    h.behaviour = async () => ({ outcome: 'transient', exitCode: 75 });
    expect(await h.attempt(runId)).toEqual({ result: 'failed' });
    expect(await runRow(runId)).toMatchObject({ status: 'FAILED', attempts: MAX_ATTEMPTS, last_error: 'exit 75' });
    expect((await h.lastEvent(runId)).reason).toBe(
      `exit 75 (transient); attempts exhausted (${MAX_ATTEMPTS}/${MAX_ATTEMPTS})`,
    );
  });

  it('records nothing when a newer holder took the run during the attempt (fenced)', async () => {
    const { runId } = await h.queuedRun();
    h.behaviour = async (req) => {
      await db().query(`UPDATE runs SET fencing_token = fencing_token + 10 WHERE id = $1`, [req.runId]);
      return {};
    };
    expect(await h.attempt(runId)).toEqual({ result: 'fenced' });
    expect(await runRow(runId)).toMatchObject({ status: 'RUNNING' });
  });

  it('announces a finished run at once (the kick), not only when a sweeper comes by', async () => {
    const { runId } = await h.queuedRun();
    h.behaviour = async () => ({});
    expect(await h.attempt(runId)).toEqual({ result: 'succeeded' });
    // This process has no scheduler: without the kick nobody would deliver the row.
    await waitFor(
      () => h.stub.requests.some((r) => r.text.includes(runId) && r.state === 'answered'),
      10_000,
      'the message',
    );
  });

  it('a run that is not runnable is skipped with the reason; a live lease makes Bull come back later', async () => {
    const { runId } = await h.queuedRun();
    await db().query(`UPDATE runs SET status = 'SUCCESS', finished_at = now() WHERE id = $1`, [runId]);
    h.behaviour = async () => {
      throw new Error('must not execute');
    };
    expect(await h.attempt(runId)).toEqual({ result: 'skipped: run is SUCCESS' });
    await db().query(
      `UPDATE runs SET status = 'RUNNING', finished_at = NULL, lease_owner = 'someone', lease_expires_at = now() + interval '5 seconds' WHERE id = $1`,
      [runId],
    );
    const { error } = await h.attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect((error as RetryLaterError).retryDelayMs).toBeGreaterThan(4000);
  });
});
