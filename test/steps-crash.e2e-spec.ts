import { join } from 'node:path';
import {
  auth,
  closeDb,
  createProject,
  createRun,
  db,
  isAlive,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  waitForStatus,
  WorkerProcess,
} from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';
import { LlmStub } from './support/llm-stub';
import { effectsByStep, STEPS_ORCHESTRATOR, stepLines, stepsBegunIn } from './support/steps';

/**
 * Steps under real faults: compiled worker processes killed with -9 or frozen with SIGSTOP while
 * a multi-step run executes. Which step ran in which attempt, and each step's effect, are read
 * from the file the steps themselves append to; LLM calls are counted by the stub provider.
 */
describe('steps under worker crashes and freezes', () => {
  const dir = tempDir('steps-crash');
  const log = join(dir, 'steps.log');
  let llm: LlmStub;
  let env: Record<string, string>;
  let api: TestApp;
  let workers: WorkerProcess[] = [];

  beforeAll(async () => {
    llm = await LlmStub.start();
    env = testEnv('steps-crash', log, {
      REDIS_PREFIX: uniquePrefix('steps-crash'),
      ORCHESTRATOR_COMMAND: `sh '${STEPS_ORCHESTRATOR}' '${log}'`,
      LLM_OPENAI_UPSTREAM: llm.openaiUrl,
      WORKER_CONCURRENCY: '2',
      // Log lines are checked for credentials: let the workers say something.
      LOG_LEVEL: 'info',
    });
    api = await startApp({ ...env, APP_ROLE: 'api', LOG_LEVEL: 'silent' });
  });
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    workers = [];
  });
  afterAll(async () => {
    await api.close();
    await llm.close();
    await closeDb();
  });

  const began = (runId: string, step: string, attempt: number) => () =>
    stepLines(log, runId).some((l) => l.kind === 'stepbegin' && l.extra === step && l.attempt === attempt);

  /** Two workers; the one that claimed the run is the victim, the other takes over. */
  async function holder(runId: string): Promise<{ victim: WorkerProcess; other: WorkerProcess }> {
    const { rows } = await db().query(`SELECT lease_owner FROM runs WHERE id = $1 AND status = 'RUNNING'`, [runId]);
    const pid = Number(String(rows[0]?.lease_owner ?? '').split(':')[1]);
    const victim = workers.find((w) => w.child.pid === pid);
    if (!victim) throw new Error(`run ${runId} is not held by a test worker (lease owner ${rows[0]?.lease_owner})`);
    return { victim, other: workers.find((w) => w !== victim)! };
  }

  it('kill -9 of the worker after 2 of 4 steps: the next attempt runs only steps 3–4, each effect once, one LLM call', async () => {
    const a = await startProcess(env);
    workers.push(a);
    const project = await createProject(api.http);
    const run = await createRun(api.http, project.id, 'steps=4 llm slow=3', true);
    await waitFor(began(run.id, 's3', 1), 20_000, 'step s3 of attempt 1 to begin');
    const stepPids = stepLines(log, run.id)
      .filter((l) => l.attempt === 1)
      .map((l) => l.pid);
    a.child.kill('SIGKILL');
    // The dead worker's command (and the step inside it) dies with it: step 3's effect never happens.
    await waitFor(() => stepPids.every((pid) => !isAlive(pid)), 5_000, "the killed worker's commands to die");
    const b = await startProcess(env);
    workers.push(b);
    await waitForStatus([run.id], ['SUCCESS'], 60_000);
    expect(stepsBegunIn(log, run.id, 1)).toEqual(['s1', 's2', 's3']);
    expect(stepsBegunIn(log, run.id, 2)).toEqual(['s3', 's4']);
    expect(effectsByStep(log, run.id)).toEqual({ s1: 1, s2: 1, s3: 1, s4: 1 });
    expect(llm.count()).toBe(1);
    const steps = (await api.http.get(`/api/runs/${run.id}/steps`).set(auth)).body.items;
    expect(
      steps.map((s: { name: string; status: string; attempt: number }) => `${s.name}:${s.status}:${s.attempt}`),
    ).toEqual(['s1:DONE:1', 's2:DONE:1', 's3:DONE:2', 's4:DONE:2']);
    // No credential, no provider key in any log line of either worker.
    for (const out of [a.output(), b.output()]) {
      expect(out).toContain('run started');
      expect(out).not.toMatch(/ofr_|sk-test|\/llm\//);
    }
  }, 120_000);

  it('a frozen worker and a process that escaped its attempt are refused: nothing recorded, no effect', async () => {
    workers = await Promise.all([startProcess(env), startProcess(env)]);
    const project = await createProject(api.http);
    // The escaped process (its own session, so the group kill misses it) calls `onceflow step` 2 s in.
    const run = await createRun(api.http, project.id, 'steps=3 slow=2 escape=2', true);
    await waitFor(began(run.id, 's2', 1), 30_000, 'step s2 of attempt 1 to begin');
    const { victim: a } = await holder(run.id);
    a.child.kill('SIGSTOP');
    await waitForStatus([run.id], ['SUCCESS'], 60_000);
    // The frozen worker wakes up: its late heartbeat loses the lease, and the escaped call it was
    // holding is answered "no longer holds the run".
    a.child.kill('SIGCONT');
    await waitFor(
      () => stepLines(log, run.id).some((l) => l.kind === 'escaped'),
      20_000,
      'the escaped process to get its answer',
    );
    const escaped = stepLines(log, run.id).find((l) => l.kind === 'escaped')!;
    if (escaped.extra !== '3') process.stderr.write(a.output());
    expect(escaped.extra).toBe('3');
    expect(stepsBegunIn(log, run.id, 2)).toEqual(['s2', 's3']);
    expect(effectsByStep(log, run.id)).toEqual({ s1: 1, s2: 1, s3: 1 });
    const { rows } = await db().query(`SELECT name, attempt FROM run_steps WHERE run_id = $1 ORDER BY id`, [run.id]);
    expect(rows).toEqual([
      { name: 's1', attempt: 1 },
      { name: 's2', attempt: 2 },
      { name: 's3', attempt: 2 },
    ]);
  }, 120_000);
});
