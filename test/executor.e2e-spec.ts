import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutionRequest } from '../src/runs/executor/executor';
import { resolveRunIdentity } from '../src/runs/executor/run-identity';
import { ShellExecutor } from '../src/runs/executor/shell-executor';
import {
  auth,
  blockEventLoop,
  closeDb,
  count,
  createProject,
  createRun,
  executions,
  isAlive,
  startApp,
  TestApp,
  waitFor,
  waitForStatus,
} from './support/app';
import { FAKE_ORCHESTRATOR, tempDir, testEnv } from './support/env';

/** What a run executes: env-only data, output tail, timeout, and the per-project cap. */
describe('executor', () => {
  const dir = tempDir('exec');
  const countFile = join(dir, 'executions.log');
  const envDump = join(dir, 'env');
  let t: TestApp;

  beforeAll(async () => {
    // The command dumps its environment, then behaves like the fake orchestrator.
    const command = `env > '${envDump}.'"$RUN_ID"; echo "out-line-for-$RUN_ID"; sh '${FAKE_ORCHESTRATOR}' '${countFile}'`;
    t = await startApp(
      testEnv('exec', countFile, { ORCHESTRATOR_COMMAND: command, RUN_TIMEOUT_MS: '700', RUN_MAX_ATTEMPTS: '2' }),
    );
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('passes run data only through environment variables; a requirement is never shell code', async () => {
    const marker = join(dir, 'pwned');
    const requirement = `$(touch ${marker}) \`touch ${marker}\`; touch ${marker} "quoted" 'single'`;
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, requirement, true);
    await waitForStatus([run.id], ['SUCCESS']);
    expect(existsSync(marker)).toBe(false);
    const env = Object.fromEntries(
      readFileSync(`${envDump}.${run.id}`, 'utf8')
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(env).toMatchObject({
      RUN_ID: run.id,
      RUN_ATTEMPT: '1',
      PROJECT_ID: project.id,
      PROJECT_NAME: project.name,
      TASK_ID: '',
      IDEMPOTENCY_KEY: `onceflow-run-${run.id}`,
    });
    expect(Number(env.RUN_FENCING_TOKEN)).toBeGreaterThan(0);
    expect(env.PWD).toBe(join(t.config.runs.workspaceRoot, project.id));
    // onceflow's own credentials are withheld from the orchestrator.
    expect(env.API_KEYS).toBeUndefined();
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body.outputTail).toContain(`out-line-for-${run.id}`);
  });

  it('kills a command at RUN_TIMEOUT_MS and counts it transient until attempts run out', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'sleep=5', true);
    await waitForStatus([run.id], ['FAILED'], 20_000);
    expect(count(countFile, 'start', run.id)).toBe(2);
    expect(count(countFile, 'done', run.id)).toBe(0);
    for (const e of executions(countFile).filter((x) => x.runId === run.id)) expect(isAlive(e.pid)).toBe(false);
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body).toMatchObject({ status: 'FAILED', attempts: 2, lastError: 'timed out after 700 ms' });
  });

  it('holds runs over the project cap until a slot frees, never failing them', async () => {
    const project = await createProject(t.http, { maxConcurrentRuns: 1 });
    const runs = await Promise.all([0, 1, 2].map((i) => createRun(t.http, project.id, `sleep=0.3 cap ${i}`, true)));
    await waitForStatus(
      runs.map((r) => r.id),
      ['SUCCESS'],
      20_000,
    );
    const lines = executions(countFile).filter((e) => runs.some((r) => r.id === e.runId));
    expect(lines.filter((e) => e.kind === 'start')).toHaveLength(3);
    // Intervals [start, done] of the three runs never overlap.
    const spans = runs
      .map(
        (r) =>
          [
            lines.find((e) => e.runId === r.id && e.kind === 'start')!.atNs,
            lines.find((e) => e.runId === r.id && e.kind === 'done')!.atNs,
          ] as const,
      )
      .sort((a, b) => (a[0] < b[0] ? -1 : 1));
    for (let i = 1; i < spans.length; i++) expect(spans[i][0] >= spans[i - 1][1]).toBe(true);
    for (const r of runs) expect((await t.http.get(`/api/runs/${r.id}`).set(auth)).body.attempts).toBe(1);
  });
});

/** ShellExecutor on its own: how an attempt's end is classified when an abort races it. */
describe('ShellExecutor and aborts', () => {
  const dir = tempDir('exec-abort');
  const request = (runId: string): ExecutionRequest => ({
    runId,
    attempt: 1,
    fencingToken: '1',
    requirement: '',
    projectId: 'p',
    projectName: 'p',
    projectWorkspace: dir,
    taskId: null,
    workspace: dir,
    idempotencyKey: `k-${runId}`,
    timeoutMs: 20_000,
  });
  const markers = (name: string) => ({
    started: join(dir, `${name}.started`),
    finished: join(dir, `${name}.finished`),
  });

  it('a command that finished on its own counts as finished, even when the lease was lost before its exit reached us', async () => {
    const m = markers('raced');
    const executor = new ShellExecutor(
      `touch '${m.started}'; sleep 0.3; echo done > '${m.finished}'`,
      process.env,
      resolveRunIdentity(undefined),
      tmpdir(),
    );
    const abort = new AbortController();
    const pending = executor.execute(request('raced'), abort.signal);
    await waitFor(() => existsSync(m.started), 10_000, 'the command to start');
    // Blocked until the command has written its effect and exited: its exit event now waits
    // behind the abort below, as when a heartbeat fails on a starved worker.
    blockEventLoop(100);
    for (let i = 0; i < 100 && !existsSync(m.finished); i++) blockEventLoop(50);
    blockEventLoop(200);
    abort.abort(new Error('lease lost'));
    const result = await pending;
    expect(readFileSync(m.finished, 'utf8')).toBe('done\n');
    // "aborted" here would give the finished run to another attempt: its effect twice.
    expect(result).toMatchObject({ outcome: 'success', exitCode: 0, signal: null });
  });

  it('a command the abort killed is aborted', async () => {
    const m = markers('killed');
    const executor = new ShellExecutor(
      `touch '${m.started}'; sleep 5; touch '${m.finished}'`,
      process.env,
      resolveRunIdentity(undefined),
      tmpdir(),
    );
    const abort = new AbortController();
    const pending = executor.execute(request('killed'), abort.signal);
    await waitFor(() => existsSync(m.started), 10_000, 'the command to start');
    abort.abort(new Error('lease lost'));
    expect(await pending).toMatchObject({ outcome: 'aborted', exitCode: null, signal: 'SIGKILL' });
    expect(existsSync(m.finished)).toBe(false);
  });
});
