import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliScript } from '../src/runs/steps/onceflow-bin';
import { auth, closeDb, createProject, createRun, db, startApp, TestApp, waitFor, waitForStatus } from './support/app';
import { tempDir, testEnv } from './support/env';
import { LlmStub } from './support/llm-stub';
import { effectsByStep, STEPS_ORCHESTRATOR, stepLines, stepsBegunIn } from './support/steps';

/**
 * Steps and values through a real worker (in-process app, shell executor, the compiled CLI): each
 * step's effect counted from the file the step itself appends to, never from our tables.
 */
describe('steps: a retried run resumes after its last finished step', () => {
  const dir = tempDir('steps');
  const log = join(dir, 'steps.log');
  let llm: LlmStub;
  let t: TestApp;

  beforeAll(async () => {
    llm = await LlmStub.start();
    t = await startApp(
      testEnv('steps', log, {
        ORCHESTRATOR_COMMAND: `sh '${STEPS_ORCHESTRATOR}' '${log}'`,
        LLM_OPENAI_UPSTREAM: llm.openaiUrl,
        LLM_ANTHROPIC_UPSTREAM: llm.anthropicUrl,
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
    await closeDb();
  });

  it('runs every step once and records each DONE, in order, with its output', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'steps=4', true);
    await waitForStatus([run.id], ['SUCCESS']);
    expect(effectsByStep(log, run.id)).toEqual({ s1: 1, s2: 1, s3: 1, s4: 1 });
    const steps = (await t.http.get(`/api/runs/${run.id}/steps`).set(auth).expect(200)).body.items;
    expect(steps.map((s: { name: string }) => s.name)).toEqual(['s1', 's2', 's3', 's4']);
    for (const s of steps) {
      expect(s).toMatchObject({ status: 'DONE', attempt: 1, exitCode: 0 });
      expect(s.outputBytes).toBe(Buffer.byteLength(`output of ${s.name} (${run.id}:${s.name})\n`));
      expect(Date.parse(s.finishedAt)).toBeGreaterThanOrEqual(Date.parse(s.startedAt));
    }
    const events = (await t.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items;
    expect(events[events.length - 1].reason).toContain('steps: 4 run, 0 replayed');
  });

  it('a transient failure in step 3 resumes at step 3: steps 1–2 are replayed, not run', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'steps=4 failstep=3', true);
    await waitForStatus([run.id], ['SUCCESS']);
    expect(stepsBegunIn(log, run.id, 1)).toEqual(['s1', 's2', 's3']);
    expect(stepsBegunIn(log, run.id, 2)).toEqual(['s3', 's4']);
    expect(effectsByStep(log, run.id)).toEqual({ s1: 1, s2: 1, s3: 1, s4: 1 });
    const steps = (await t.http.get(`/api/runs/${run.id}/steps`).set(auth)).body.items;
    expect(steps.map((s: { name: string; attempt: number }) => [s.name, s.attempt])).toEqual([
      ['s1', 1],
      ['s2', 1],
      ['s3', 2],
      ['s4', 2],
    ]);
    // A replayed step prints what it printed when it ran.
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body.outputTail).toContain(`output of s1 (${run.id}:s1)`);
    const events = (await t.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items;
    expect(events.find((e: { to: string }) => e.to === 'RETRYING').reason).toContain('steps: 3 run, 0 replayed');
    expect(events[events.length - 1].reason).toContain('steps: 2 run, 2 replayed');
  });

  it('an LLM answer inside a finished step is not asked for again by the next attempt', async () => {
    const before = llm.count();
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'steps=3 llm failstep=3', true);
    await waitForStatus([run.id], ['SUCCESS']);
    expect(llm.count() - before).toBe(1);
    expect(llm.calls[llm.calls.length - 1].authorization).toBe('Bearer sk-test-openai-key');
    expect(effectsByStep(log, run.id)).toEqual({ s1: 1, s2: 1, s3: 1 });
  });

  it('a process that escaped its attempt cannot record a step once the run is finished', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'steps=1 escape=1.5', true);
    await waitForStatus([run.id], ['SUCCESS']);
    await waitFor(
      () => stepLines(log, run.id).some((l) => l.kind === 'escaped'),
      10_000,
      'the escaped process to try its step',
    );
    const escaped = stepLines(log, run.id).find((l) => l.kind === 'escaped')!;
    expect(escaped.extra).toBe('3');
    expect(effectsByStep(log, run.id)).toEqual({ s1: 1 });
    const { rows } = await db().query(`SELECT name FROM run_steps WHERE run_id = $1 ORDER BY id`, [run.id]);
    expect(rows.map((r) => r.name)).toEqual(['s1']);
  });
});

/** The CLI on its own: usage errors, an unreachable worker, values across attempts. */
describe('the onceflow CLI', () => {
  const cli = (args: string[], env: Record<string, string> = {}, input?: string) =>
    spawnSync(process.execPath, [cliScript(), ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      input,
      encoding: 'utf8',
    });

  it('refuses bad usage with exit 2 and a message, before calling anyone', () => {
    const env = { ONCEFLOW_URL: 'http://127.0.0.1:9', ONCEFLOW_RUN_TOKEN: 'x' };
    for (const args of [
      [],
      ['nope'],
      ['step'],
      ['step', 'a b', '--', 'true'],
      ['step', 'x'.repeat(129), '--', 'true'],
      ['step', 'ok', 'true'],
      ['get', '../etc'],
    ]) {
      const r = cli(args, env);
      expect({ args, status: r.status }).toEqual({ args, status: 2 });
      expect(r.stderr).toMatch(/^onceflow: /);
    }
    expect(cli(['get', 'k']).status).toBe(2); // not inside a run
  });

  it('exits 75 when the worker cannot be reached, and does not run the step', () => {
    const marker = join(tempDir('cli'), 'ran');
    const r = cli(['step', 'one', '--', 'sh', '-c', `touch '${marker}'`], {
      ONCEFLOW_URL: 'http://127.0.0.1:9',
      ONCEFLOW_RUN_TOKEN: 'x',
    });
    expect(r.status).toBe(75);
    expect(r.stderr).toContain('cannot be reached');
    expect(() => readFileSync(marker)).toThrow();
  });
});

describe('values across attempts, and one run never sees another', () => {
  const dir = tempDir('values');
  const log = join(dir, 'values.log');
  let t: TestApp;

  beforeAll(async () => {
    // Attempt 1 stores a value and fails transiently; attempt 2 reads it back. A second run reads the same key.
    const script = join(dir, 'values.sh');
    writeFileSync(
      script,
      `out="$1"
case "$RUN_REQUIREMENT:$RUN_ATTEMPT" in *retry*:1) printf 'secret of %s' "$RUN_ID" | onceflow put note || exit 9 ;; esac
v=$(onceflow get note); code=$?
echo "$RUN_ID $RUN_ATTEMPT $code $v" >> "$out"
onceflow get "bad name"; echo "$RUN_ID usage $?" >> "$out"
[ "$RUN_ATTEMPT" = 1 ] && case "$RUN_REQUIREMENT" in *retry*) exit 75 ;; esac
exit 0
`,
    );
    t = await startApp(testEnv('values', log, { ORCHESTRATOR_COMMAND: `sh '${script}' '${log}'` }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('a value put by attempt 1 is read by attempt 2 of the same run, and by no other run', async () => {
    const project = await createProject(t.http);
    const a = await createRun(t.http, project.id, 'retry', true);
    await waitForStatus([a.id], ['SUCCESS']);
    const b = await createRun(t.http, project.id, 'other', true);
    // b never puts: it only tries to read what a stored under the same key.
    await waitForStatus([b.id], ['SUCCESS']);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines).toContain(`${a.id} 1 0 secret of ${a.id}`);
    expect(lines).toContain(`${a.id} 2 0 secret of ${a.id}`);
    expect(lines).toContain(`${b.id} 1 1 `);
    expect(lines).toContain(`${a.id} usage 2`);
  });
});
