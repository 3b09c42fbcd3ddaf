import type { Job } from 'bull';
import { join } from 'node:path';
import { TaskLockService } from '../../src/locks/task-lock.service';
import { runLockKey } from '../../src/queues/job-ids';
import type { RunJobData } from '../../src/queues/queue-names';
import type { ExecutionRequest, ExecutionResult, RunExecutor } from '../../src/runs/executor/executor';
import { AttemptRunner } from '../../src/runs/worker/attempt-runner';
import { RunProcessor } from '../../src/runs/worker/run.processor';
import { closeDb, db, startApp, TestApp } from './app';
import { tempDir, testEnv } from './env';
import { insertRun, runEvents } from './run-rows';
import { SlackStub } from './slack-stub';

export const TTL_MS = 1500;
export const MAX_ATTEMPTS = 3;
export const TIMEOUT_MS = 4321;

export type Behaviour = (req: ExecutionRequest, signal: AbortSignal) => Promise<Partial<ExecutionResult>>;

export interface ProcessorHarness {
  readonly t: TestApp;
  readonly processor: RunProcessor;
  readonly guard: TaskLockService;
  /** Every request the scripted executor was given, in order. */
  readonly requests: ExecutionRequest[];
  readonly stub: SlackStub;
  /** What the scripted executor does for the next attempts (its result overrides a success). */
  behaviour: Behaviour;
  /** Whether the scripted executor asks for the worker's API (a credential per attempt); reset after each test. */
  runApi: boolean;
  /** A QUEUED run of a fresh project (cap 5), with `attempts` already counted. */
  queuedRun(state?: { attempts?: number }): Promise<{ runId: string; projectId: string; workspace: string }>;
  /** One attempt as the Bull worker runs it: run lock, claim, execute, finalize. */
  attempt(runId: string): Promise<{ result?: unknown; error?: unknown }>;
  lastEvent(runId: string): Promise<Awaited<ReturnType<typeof runEvents>>[number]>;
  /** For beforeAll: the Slack stub and the worker app, with the scripted executor in place. */
  start(): Promise<void>;
  /** For afterEach. */
  reset(): void;
  /** For afterAll: leaves nothing runnable for other files' reapers, closes the app. */
  stop(): Promise<void>;
}

/**
 * RunProcessor.handle called directly, under a real run lock (TaskLockService.runGuarded) and a
 * real claim, with an executor the test scripts. Worker role (no scheduler, no API): nothing else
 * touches the rows. The spec wires start/reset/stop to beforeAll/afterEach/afterAll (this file is
 * also compiled outside jest, without its globals).
 */
export function processorHarness(name: string): ProcessorHarness {
  const dir = tempDir(name);
  let stub: SlackStub;
  let t: TestApp;
  let behaviour: Behaviour = async () => ({});
  let runApi = false;
  const requests: ExecutionRequest[] = [];
  const projects: string[] = [];

  const start = async (): Promise<void> => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv(name, join(dir, 'executions.log'), {
        APP_ROLE: 'worker',
        RUN_LOCK_TTL_MS: String(TTL_MS),
        RUN_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
        RUN_TIMEOUT_MS: String(TIMEOUT_MS),
        RUN_RETRY_BASE_DELAY_MS: '100',
        RUN_RETRY_MAX_DELAY_MS: '100',
        SLACK_WEBHOOK_URL: stub.url,
      }),
    );
    const executor: RunExecutor = {
      kind: 'scripted',
      get usesRunApi() {
        return runApi;
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
  };
  const reset = (): void => {
    runApi = false;
  };
  const stop = async (): Promise<void> => {
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
  };

  return {
    start,
    reset,
    stop,
    get t() {
      return t;
    },
    get processor() {
      return t.app.get(RunProcessor);
    },
    get guard() {
      return t.app.get(TaskLockService);
    },
    get stub() {
      return stub;
    },
    requests,
    get behaviour() {
      return behaviour;
    },
    set behaviour(b: Behaviour) {
      behaviour = b;
    },
    get runApi() {
      return runApi;
    },
    set runApi(on: boolean) {
      runApi = on;
    },
    async queuedRun(state = {}) {
      const project = `proc-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      const workspace = join(t.config.runs.workspaceRoot, project);
      const { rows } = await db().query(
        `INSERT INTO projects (name, workspace_path, max_concurrent_runs) VALUES ($1, $2, 5) RETURNING id`,
        [project, workspace],
      );
      projects.push(rows[0].id);
      const runId = await insertRun(rows[0].id, {
        status: 'QUEUED',
        attempts: state.attempts ?? 0,
        requirement: `requirement of ${project}`,
      });
      return { runId, projectId: rows[0].id, workspace };
    },
    async attempt(runId) {
      const job = { id: `job-${runId}`, data: { runId }, attemptsMade: 0 } as unknown as Job<RunJobData>;
      const processor = t.app.get(RunProcessor);
      try {
        const result = await t.app.get(TaskLockService).runGuarded(job, {
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
    },
    lastEvent: async (runId) => (await runEvents(runId)).at(-1)!,
  };
}
