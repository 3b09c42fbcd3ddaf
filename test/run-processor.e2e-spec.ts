import type { Job } from 'bull';
import { join } from 'node:path';
import { ShutdownAbort } from '../src/locks/heartbeat';
import type { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { RetryLaterError } from '../src/locks/retry-later.error';
import { TaskLockService } from '../src/locks/task-lock.service';
import { runLockKey } from '../src/queues/job-ids';
import type { RunJobData } from '../src/queues/queue-names';
import type { ExecutionRequest, ExecutionResult, RunExecutor } from '../src/runs/executor/executor';
import { AttemptRunner } from '../src/runs/worker/attempt-runner';
import { RunProcessor } from '../src/runs/worker/run.processor';
import { RunAttempts } from '../src/runs/steps/run-attempts';
import { closeDb, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertRun, runEvents, runRow } from './support/run-rows';
import { SlackStub } from './support/slack-stub';

const TTL_MS = 1500;
const MAX_ATTEMPTS = 3;
const TIMEOUT_MS = 4321;

type Behaviour = (req: ExecutionRequest, signal: AbortSignal) => Promise<Partial<ExecutionResult>>;

/**
 * RunProcessor.handle called directly, under a real run lock (TaskLockService.runGuarded) and a
 * real claim, with an executor the test scripts: how each way an attempt can end is written to
 * Postgres (status, reason, last error), what the handler answers Bull, and what the executor is
 * asked to do. Worker role (no scheduler, no API): nothing else touches the rows. Runs that end
 * by the real shell command are in executor.e2e and retries.e2e.
 */
describe('RunProcessor: from an attempt’s end to the run’s row', () => {
  const dir = tempDir('processor');
  let stub: SlackStub;
  let t: TestApp;
  let processor: RunProcessor;
  let guard: TaskLockService;
  let behaviour: Behaviour;
  let usesRunApi = false;
  const requests: ExecutionRequest[] = [];
  const projects: string[] = [];

  beforeAll(async () => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv('processor', join(dir, 'executions.log'), {
        APP_ROLE: 'worker',
        RUN_LOCK_TTL_MS: String(TTL_MS),
        RUN_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
        RUN_TIMEOUT_MS: String(TIMEOUT_MS),
        RUN_RETRY_BASE_DELAY_MS: '100',
        RUN_RETRY_MAX_DELAY_MS: '100',
        SLACK_WEBHOOK_URL: stub.url,
      }),
    );
    processor = t.app.get(RunProcessor);
    guard = t.app.get(TaskLockService);
    const executor: RunExecutor = {
      kind: 'scripted',
      get usesRunApi() {
        return usesRunApi;
      },
      execute: async (req, signal) => {
        requests.push(req);
        const started = Date.now();
        return {
          outcome: 'success',
          exitCode: 0,
          signal: null,
          timedOut: false,
          outputTail: '',
          durationMs: Date.now() - started,
          ...(await behaviour(req, signal)),
        };
      },
    };
    (t.app.get(AttemptRunner) as unknown as { executor: RunExecutor }).executor = executor;
  });
  afterEach(() => {
    usesRunApi = false;
  });
  afterAll(async () => {
    // Other files' reapers and reconcilers share the database: leave them nothing to take up.
    await db().query(
      `UPDATE runs SET status = 'CANCELLED', lease_expires_at = NULL WHERE project_id = ANY($1) AND status IN ('QUEUED', 'RUNNING', 'RETRYING')`,
      [projects],
    );
    await db().query(
      `DELETE FROM notification_logs WHERE status = 'PENDING' AND run_id IN (SELECT id FROM runs WHERE project_id = ANY($1))`,
      [projects],
    );
    await t.close();
    await stub.close();
    await closeDb();
  });

  async function queuedRun(
    state: { attempts?: number } = {},
  ): Promise<{ runId: string; projectId: string; workspace: string }> {
    const name = `proc-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const workspace = join(t.config.runs.workspaceRoot, name);
    const { rows } = await db().query(
      `INSERT INTO projects (name, workspace_path, max_concurrent_runs) VALUES ($1, $2, 5) RETURNING id`,
      [name, workspace],
    );
    projects.push(rows[0].id);
    const runId = await insertRun(rows[0].id, {
      status: 'QUEUED',
      attempts: state.attempts ?? 0,
      requirement: `requirement of ${name}`,
    });
    return { runId, projectId: rows[0].id, workspace };
  }

  /** One attempt as the Bull worker runs it: run lock, claim, execute, finalize. */
  async function attempt(runId: string): Promise<{ result?: unknown; error?: unknown }> {
    const job = { id: `job-${runId}`, data: { runId }, attemptsMade: 0 } as unknown as Job<RunJobData>;
    try {
      const result = await guard.runGuarded(job, {
        name: 'runs',
        concurrency: 1,
        ttlMs: TTL_MS,
        lockKey: (j: Job<RunJobData>) => runLockKey(j.data.runId),
        handler: (j: Job<RunJobData>, lease) => processor.handle(j, lease),
      });
      return { result };
    } catch (error) {
      return { error };
    }
  }

  const lastEvent = async (runId: string) => (await runEvents(runId)).at(-1)!;

  it('asks the executor for the claimed attempt: its data, the timeout, a watchdog deadline within 0.8 × the lock TTL, the project’s workspace', async () => {
    const { runId, projectId, workspace } = await queuedRun({ attempts: 1 });
    let guardIn = NaN;
    behaviour = async (req) => {
      guardIn = req.guardUntil!() - Date.now();
      return {};
    };
    expect(await attempt(runId)).toEqual({ result: 'succeeded' });
    const req = requests.find((r) => r.runId === runId)!;
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
    expect((await lastEvent(runId)).reason).toBe('exit 0');
  });

  it('gives a command that calls back into the worker a credential for this attempt only, and its step counts in the reason', async () => {
    const { runId } = await queuedRun();
    const attempts = t.app.get(RunAttempts);
    usesRunApi = true;
    behaviour = async (req) => {
      const grant = attempts.resolve(req.runApi?.env.ONCEFLOW_RUN_TOKEN);
      expect(grant).toMatchObject({ runId });
      grant!.stats.executed = 2;
      grant!.stats.replayed = 1;
      return {};
    };
    expect(await attempt(runId)).toEqual({ result: 'succeeded' });
    const req = requests.find((r) => r.runId === runId)!;
    // Revoked with the attempt: a command left running cannot use it any more.
    expect(attempts.resolve(req.runApi!.env.ONCEFLOW_RUN_TOKEN)).toBeUndefined();
    expect((await lastEvent(runId)).reason).toBe('exit 0; steps: 2 run, 1 replayed');
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
      const { runId } = await queuedRun();
      behaviour = async () => result;
      expect(await attempt(runId)).toEqual({ result: 'failed' });
      expect(await runRow(runId)).toMatchObject({ status: 'FAILED', attempts: 1, last_error: text });
      expect((await lastEvent(runId)).reason).toBe(text);
    },
  );

  it('a transient attempt with attempts left is RETRYING, and Bull is told to come back after the backoff', async () => {
    const { runId } = await queuedRun({ attempts: MAX_ATTEMPTS - 2 });
    behaviour = async () => ({ outcome: 'transient', exitCode: 75 });
    const { error } = await attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    const delay = (error as RetryLaterError).retryDelayMs;
    expect(delay).toBeGreaterThan(0);
    expect(delay).toBeLessThanOrEqual(100);
    expect(await runRow(runId)).toMatchObject({
      status: 'RETRYING',
      attempts: MAX_ATTEMPTS - 1,
      last_error: 'exit 75',
    });
    expect((await lastEvent(runId)).reason).toBe(`exit 75 (transient); retry in ${delay} ms`);
  });

  it('a transient attempt that was the last one is FAILED, and says the attempts are spent', async () => {
    const { runId } = await queuedRun({ attempts: MAX_ATTEMPTS - 1 });
    behaviour = async () => ({ outcome: 'transient', exitCode: 75 });
    expect(await attempt(runId)).toEqual({ result: 'failed' });
    expect(await runRow(runId)).toMatchObject({ status: 'FAILED', attempts: MAX_ATTEMPTS, last_error: 'exit 75' });
    expect((await lastEvent(runId)).reason).toBe(
      `exit 75 (transient); attempts exhausted (${MAX_ATTEMPTS}/${MAX_ATTEMPTS})`,
    );
  });

  it('records nothing when a newer holder took the run during the attempt (fenced)', async () => {
    const { runId } = await queuedRun();
    behaviour = async (req) => {
      await db().query(`UPDATE runs SET fencing_token = fencing_token + 10 WHERE id = $1`, [req.runId]);
      return {};
    };
    expect(await attempt(runId)).toEqual({ result: 'fenced' });
    expect(await runRow(runId)).toMatchObject({ status: 'RUNNING' });
  });

  it('an aborted attempt records nothing and comes back after a lock TTL', async () => {
    const { runId } = await queuedRun();
    behaviour = async () => ({ outcome: 'aborted', exitCode: null, signal: 'SIGKILL' });
    const { error } = await attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect((error as RetryLaterError).retryDelayMs).toBe(TTL_MS + 100);
    expect((error as Error).message).toBe('attempt aborted (lock lost or cancelled)');
    expect(await runRow(runId)).toMatchObject({ status: 'RUNNING', attempts: 1 });
  });

  it('a cancel reaches the running attempt at the next beat: its signal aborts, nothing is recorded', async () => {
    const { runId } = await queuedRun();
    let abortedAfter = -1;
    behaviour = async (_req, signal) => {
      const cancelled = Date.now();
      await db().query(`UPDATE runs SET status = 'CANCELLED', finished_at = now() WHERE id = $1`, [runId]);
      await waitFor(() => signal.aborted, TTL_MS * 2, 'the lease to abort');
      abortedAfter = Date.now() - cancelled;
      return { outcome: 'aborted', exitCode: null, signal: 'SIGKILL' };
    };
    const { error } = await attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect(abortedAfter).toBeLessThan(TTL_MS);
    expect(await runRow(runId)).toMatchObject({ status: 'CANCELLED' });
  });

  it('each beat renews the lease in Postgres and feeds the command’s watchdog', async () => {
    const { runId } = await queuedRun();
    let pings = 0;
    const leases: number[] = [];
    const guards: Array<{ until: number; lockEnds: number }> = [];
    const locks = t.app.get<LockService>(LOCK_SERVICE);
    behaviour = async (req) => {
      req.keepAlive?.(() => pings++);
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, TTL_MS / 3));
        leases.push(Number((await runRow(runId)).lease_ms));
        const left = await locks.remainingMs(runLockKey(runId));
        // The latest the lock can end: the answer's arrival plus what Redis said was left.
        guards.push({ until: req.guardUntil!(), lockEnds: Date.now() + left });
      }
      return {};
    };
    expect(await attempt(runId)).toEqual({ result: 'succeeded' });
    expect(pings).toBeGreaterThanOrEqual(2);
    // Without the renewal the lease set by the claim would run out within the four looks.
    expect(Math.min(...leases.slice(2))).toBeGreaterThan(TTL_MS / 3);
    // The watchdog's deadline moves with the renewals and stays a fifth of the TTL before the
    // Redis lock can lapse (2 ms for PTTL's rounding).
    expect(guards.at(-1)!.until - guards[0].until).toBeGreaterThanOrEqual(TTL_MS / 3);
    for (const g of guards) expect(g.lockEnds - g.until).toBeGreaterThanOrEqual(TTL_MS * 0.2 - 2);
  });

  it('a shutdown hands the run straight back: RETRYING with the attempt not counted', async () => {
    const { runId } = await queuedRun({ attempts: 1 });
    behaviour = async (_req, signal) => {
      const active = (guard as unknown as { active: Map<string, { heartbeat: { abort(e: Error): void } }> }).active;
      for (const [key, lease] of active) if (key.includes(runId)) lease.heartbeat.abort(new ShutdownAbort());
      expect(signal.aborted).toBe(true);
      return { outcome: 'aborted', exitCode: null, signal: 'SIGKILL' };
    };
    const { error } = await attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect((error as RetryLaterError).retryDelayMs).toBe(0);
    expect((error as Error).message).toBe('handed over: worker shutting down');
    expect(await runRow(runId)).toMatchObject({ status: 'RETRYING', attempts: 1, lease_owner: null });
  });

  it('records a command that finished on its own during a shutdown: the exit wins over the hand-over', async () => {
    const { runId } = await queuedRun();
    behaviour = async () => {
      const active = (guard as unknown as { active: Map<string, { heartbeat: { abort(e: Error): void } }> }).active;
      for (const [key, lease] of active) if (key.includes(runId)) lease.heartbeat.abort(new ShutdownAbort());
      return {};
    };
    expect(await attempt(runId)).toEqual({ result: 'succeeded' });
    expect(await runRow(runId)).toMatchObject({ status: 'SUCCESS', attempts: 1 });
  });

  it('announces a finished run at once (the kick), not only when a sweeper comes by', async () => {
    const { runId } = await queuedRun();
    behaviour = async () => ({});
    expect(await attempt(runId)).toEqual({ result: 'succeeded' });
    // This process has no scheduler: without the kick nobody would deliver the row.
    await waitFor(
      () => stub.requests.some((r) => r.text.includes(runId) && r.state === 'answered'),
      10_000,
      'the message',
    );
  });

  it('a run that is not runnable is skipped with the reason; a live lease makes Bull come back later', async () => {
    const { runId } = await queuedRun();
    await db().query(`UPDATE runs SET status = 'SUCCESS', finished_at = now() WHERE id = $1`, [runId]);
    behaviour = async () => {
      throw new Error('must not execute');
    };
    expect(await attempt(runId)).toEqual({ result: 'skipped: run is SUCCESS' });
    await db().query(
      `UPDATE runs SET status = 'RUNNING', finished_at = NULL, lease_owner = 'someone', lease_expires_at = now() + interval '5 seconds' WHERE id = $1`,
      [runId],
    );
    const { error } = await attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect((error as RetryLaterError).retryDelayMs).toBeGreaterThan(4000);
  });
});
