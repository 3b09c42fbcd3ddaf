import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  auth,
  closeDb,
  createProject,
  createRun,
  db,
  runStatus,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  waitForStatus,
  WorkerProcess,
} from './support/app';
import { API_KEY, ROOT, tempDir, testEnv, uniquePrefix } from './support/env';

/**
 * The run's command is an AI agent fed with text from work items: treat it as hostile. This one
 * reads everything it can — its environment, and /proc/<pid>/environ and cmdline of every process
 * it can see — and the test looks for every credential the worker was started with.
 */
const SNOOP = `out="$1/snoop.$RUN_ID"
{ echo "uid=$(id -u)"; env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < "$f" 2>/dev/null; done; } > "$out.tmp"
grep -c . /proc/self/environ > "$out.self" 2>/dev/null
mv "$out.tmp" "$out"`;

describe('command isolation', () => {
  const dir = tempDir('isolation');
  let api: TestApp;
  let worker: WorkerProcess | undefined;
  const secrets = {
    // A second key beside the tests' own (API_KEYS is a list): the one looked for.
    API_KEYS: `${API_KEY},isolation-api-key-${Date.now()}-0123456789`,
    ADMIN_USER: 'isolation-admin',
    ADMIN_PASSWORD: `admin-password-${Date.now()}`,
    PLANE_WEBHOOK_SECRETS: `plane_wh_${'ab'.repeat(16)}`,
    SLACK_WEBHOOK_URL: `http://127.0.0.1:9/services/T0SECRET/B0SECRET/${Date.now()}`,
    // What an operator adds: cloud keys, PG* variables, anything.
    PGPASSWORD: `pg-password-${Date.now()}`,
    AWS_SECRET_ACCESS_KEY: `aws-secret-${Date.now()}`,
  };
  let env: Record<string, string>;
  const runIds: string[] = [];

  beforeAll(async () => {
    writeFileSync(join(dir, 'snoop.sh'), SNOOP, { mode: 0o755 });
    env = {
      ...testEnv('isolation', join(dir, 'unused'), {
        REDIS_PREFIX: uniquePrefix('isolation'),
        ORCHESTRATOR_COMMAND: `sh '${dir}/snoop.sh' '${dir}'`,
      }),
      ...secrets,
    };
    api = await startApp({ ...env, APP_ROLE: 'api' });
  });
  afterEach(async () => {
    await worker?.stop('SIGKILL');
    worker = undefined;
  });
  afterAll(async () => {
    // Their Slack messages point at a closed port: other files' sweeps must not find them.
    await db().query('DELETE FROM notification_logs WHERE run_id = ANY($1)', [runIds]);
    await api.close();
    await closeDb();
  });

  async function snoop(workerEnv: Record<string, string>): Promise<string> {
    worker = await startProcess(workerEnv);
    const project = await createProject(api.http);
    const run = await createRun(api.http, project.id, 'snoop', true);
    runIds.push(run.id);
    await waitForStatus([run.id], ['SUCCESS'], 30_000);
    return readFileSync(join(dir, `snoop.${run.id}`), 'utf8');
  }

  const credentials = () => ({
    ...secrets,
    API_KEYS: secrets.API_KEYS.split(',')[1],
    DATABASE_URL: env.DATABASE_URL,
    REDIS_URL: env.REDIS_URL,
  });

  it('runs as an unprivileged user and finds none of the worker’s credentials through any path', async () => {
    const seen = await snoop(env);
    expect(seen).toMatch(/^uid=65534$/m);
    // It did look: it read its own environment through /proc (RUN_ID is there).
    expect(seen).toMatch(/^RUN_ID=/m);
    for (const [name, value] of Object.entries(credentials()))
      expect({ name, found: seen.includes(value) }).toEqual({ name, found: false });
  });

  it('(control) the same command running as the worker itself does find them: RUN_AS_USER=same is the risk it says', async () => {
    const seen = await snoop({ ...env, RUN_AS_USER: 'same' });
    expect(seen).toMatch(/^uid=0$/m);
    expect(seen).toContain(secrets.API_KEYS.split(',')[1]);
    expect(seen).toContain(secrets.AWS_SECRET_ACCESS_KEY);
  });

  it('a worker that may not switch users refuses to start (one line), unless RUN_AS_USER=same', async () => {
    const main = join(ROOT, 'dist/src/main.js');
    const start = (extra: Record<string, string>) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        // Root without CAP_SETUID/CAP_SETGID, as in a container that dropped them.
        const child = spawn('setpriv', ['--bounding-set', '-setuid,-setgid', process.execPath, main], {
          env: { ...process.env, ...env, ...extra, APP_ROLE: 'worker', PORT: '0' },
        });
        let out = '';
        child.stdout.on('data', (c) => (out += c));
        child.stderr.on('data', (c) => (out += c));
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.once('exit', (code) => {
          clearTimeout(timer);
          resolve({ code, out });
        });
        if (extra.RUN_AS_USER === 'same') {
          void waitFor(() => out.includes('listening'), 20_000, 'the worker to listen').then(
            () => child.kill('SIGTERM'),
            () => child.kill('SIGKILL'),
          );
        }
      });
    const refused = await start({});
    expect(refused.code).toBe(1);
    expect(refused.out.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^onceflow: RUN_AS_USER=nobody: this worker may not start commands as another user.*RUN_AS_USER=same/,
      ),
    ]);
    const accepted = await start({ RUN_AS_USER: 'same' });
    expect(accepted.out).toContain('listening');
  });
});

describe("what reaches a run's command", () => {
  const dir = tempDir('cmd-env');
  let t: TestApp;
  const saved = { ...process.env };

  beforeAll(async () => {
    // The worker's own environment (this process: the app runs in-process).
    process.env.SHARED_TOOL_TOKEN = 'passthrough-value';
    process.env.PGPASSWORD = 'must-not-leak';
    process.env.HUGE_VARIABLE = 'x'.repeat(200 * 1024);
    // It also prints its environment: what it prints is served by the API and posted to Slack.
    const command = `env | tee '${dir}/env.'"$RUN_ID"; cat "$RUN_REQUIREMENT_FILE" > '${dir}/req.'"$RUN_ID"`;
    t = await startApp(
      testEnv('cmd-env', join(dir, 'unused'), {
        ORCHESTRATOR_COMMAND: command,
        ORCHESTRATOR_ENV_PASSTHROUGH: 'SHARED_TOOL_TOKEN',
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    for (const k of ['SHARED_TOOL_TOKEN', 'PGPASSWORD', 'HUGE_VARIABLE'])
      if (saved[k] === undefined) delete process.env[k];
    await closeDb();
  });

  const envOf = (runId: string) =>
    Object.fromEntries(
      readFileSync(join(dir, `env.${runId}`), 'utf8')
        .split('\n')
        .filter((l) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );

  it('gets the allow-list, the passthrough names, the run’s variables — nothing else of the worker', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'small requirement', true);
    await waitForStatus([run.id], ['SUCCESS']);
    const seen = envOf(run.id);
    expect(seen.SHARED_TOOL_TOKEN).toBe('passthrough-value');
    for (const name of [
      'PGPASSWORD',
      'HUGE_VARIABLE',
      'ONCEFLOW_TEST_DATABASE_URL',
      'ONCEFLOW_TEST_REDIS_URL',
      'JEST_WORKER_ID',
      'NODE_ENV',
    ])
      expect({ name, value: seen[name] }).toEqual({ name, value: undefined });
    expect(seen).toMatchObject({
      RUN_ID: run.id,
      RUN_REQUIREMENT: 'small requirement',
      PROJECT_ID: project.id,
      TASK_ID: '',
    });
    expect(readFileSync(join(dir, `req.${run.id}`), 'utf8')).toBe('small requirement');
    // The worker's HOME is not the command's: it gets a private one of its attempt, gone afterwards.
    expect(seen.HOME).toMatch(/onceflow-attempt-/);
    expect(existsSync(seen.HOME)).toBe(false);
    expect(seen.PATH.split(':')[0]).toMatch(/onceflow-bin-/);
  });

  it('its credential, printed by the command, is not in the output the API serves', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'print everything', true);
    await waitForStatus([run.id], ['SUCCESS']);
    const token = envOf(run.id).ONCEFLOW_RUN_TOKEN;
    expect(token).toMatch(/^ofr_/);
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body.outputTail).toContain('RUN_ID=');
    expect(body.outputTail).not.toContain(token);
    expect(body.outputTail).toContain('ONCEFLOW_RUN_TOKEN=[onceflow credential redacted]');
    expect(body.outputTail).toContain('/llm/[onceflow credential redacted]/openai');
  });

  it('a requirement over 64 KiB reaches the command through RUN_REQUIREMENT_FILE only (140 KB of Cyrillic: no E2BIG)', async () => {
    const requirement = 'Ж'.repeat(70_000);
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, requirement, true);
    await waitForStatus([run.id], ['SUCCESS']);
    expect(envOf(run.id).RUN_REQUIREMENT).toBeUndefined();
    expect(readFileSync(join(dir, `req.${run.id}`), 'utf8')).toBe(requirement);
  });
});

describe('a command that cannot be started', () => {
  const dir = tempDir('cmd-fail');
  let t: TestApp;

  beforeAll(async () => {
    process.env.HUGE_FOR_E2BIG = 'y'.repeat(200 * 1024);
    t = await startApp(
      testEnv('cmd-fail', join(dir, 'unused'), {
        ORCHESTRATOR_COMMAND: 'true',
        ORCHESTRATOR_ENV_PASSTHROUGH: 'HUGE_FOR_E2BIG',
        RUN_LOCK_TTL_MS: '20000',
      }),
    );
  });
  afterAll(async () => {
    delete process.env.HUGE_FOR_E2BIG;
    await t.close();
    await closeDb();
  });

  it('fails its attempt at once with the reason (E2BIG), never leaving the run RUNNING', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'any', true);
    // Well before the 20 s lease could lapse: the failure is recorded, not discovered.
    await waitFor(async () => (await runStatus(run.id)) === 'FAILED', 10_000, 'the run to fail');
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(body.lastError).toMatch(/^could not start the command: .*E2BIG/);
  });
});
