import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutionRequest, ExecutionResult } from '../src/runs/executor/executor';
import { resolveRunIdentity } from '../src/runs/executor/run-identity';
import { REQUIREMENT_ENV_MAX_BYTES, ShellExecutor } from '../src/runs/executor/shell-executor';
import { isAlive, waitFor } from './support/app';
import { tempDir } from './support/env';

/**
 * ShellExecutor on its own, with real commands (as the unprivileged run user, like the worker):
 * what the command gets (requirement, HOME, PATH), what is left after it, and how the watchdog,
 * an abort before the start, the timeout and an unusable workspace end an attempt.
 */
describe('ShellExecutor: one attempt of a real command', () => {
  const dir = tempDir('shell');
  const identity = resolveRunIdentity(undefined);
  let n = 0;
  const request = (over: Partial<ExecutionRequest> = {}): ExecutionRequest => ({
    runId: `run-${++n}`,
    attempt: 1,
    fencingToken: '7',
    requirement: 'a requirement',
    projectId: 'p',
    projectName: 'p',
    projectWorkspace: dir,
    taskId: null,
    workspace: dir,
    idempotencyKey: `k-${n}`,
    timeoutMs: 20_000,
    ...over,
  });
  /** Runs `command` (its stdout is the result's output tail). */
  const exec = (
    command: string,
    req: Partial<ExecutionRequest> = {},
    signal = new AbortController().signal,
    env = process.env,
  ) => new ShellExecutor(command, env, identity, tmpdir()).execute(request(req), signal);
  const lines = (r: ExecutionResult) => r.outputTail.trim().split('\n');

  it('hands the requirement over in a private file that is gone after the attempt, and in RUN_REQUIREMENT up to 64 KiB', async () => {
    const r = await exec(
      'echo "$RUN_REQUIREMENT_FILE"; cat "$RUN_REQUIREMENT_FILE"; echo; echo "env=${RUN_REQUIREMENT-unset}"',
      {
        requirement: 'fix the bug',
      },
    );
    const [file, content, env] = lines(r);
    expect(content).toBe('fix the bug');
    expect(env).toBe('env=fix the bug');
    expect(existsSync(file)).toBe(false);

    const exactly = 'x'.repeat(REQUIREMENT_ENV_MAX_BYTES);
    const fits = await exec('printf %s "${RUN_REQUIREMENT-unset}" | wc -c', { requirement: exactly });
    expect(fits.outputTail.trim()).toBe(String(REQUIREMENT_ENV_MAX_BYTES));
    const over = await exec('echo "${RUN_REQUIREMENT-unset}"; wc -c < "$RUN_REQUIREMENT_FILE"', {
      requirement: `${exactly}y`,
    });
    expect(lines(over)).toEqual(['unset', String(REQUIREMENT_ENV_MAX_BYTES + 1)]);
  });

  it('removes the attempt directory whatever the command left in it or took from it', async () => {
    const dirs: string[] = [];
    for (const command of [
      'dirname "$RUN_REQUIREMENT_FILE"',
      'd=$(dirname "$RUN_REQUIREMENT_FILE"); mkdir "$d/sub"; echo x > "$d/sub/f"; echo x > "$d/.rc"; echo "$d"',
      'rm "$RUN_REQUIREMENT_FILE"; dirname "$RUN_REQUIREMENT_FILE"',
    ]) {
      const r = await exec(command);
      expect(r.outcome).toBe('success');
      dirs.push(r.outputTail.trim());
    }
    for (const d of dirs) {
      expect(d).toMatch(/onceflow-attempt-/);
      expect(existsSync(d)).toBe(false);
    }
  });

  it('gives another user its attempt directory as HOME, and the worker API’s directory first on PATH', async () => {
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    const runApi = { env: { ONCEFLOW_API_URL: 'http://127.0.0.1:9/x' }, binDir: bin };
    const r = await exec(
      'echo "$HOME"; echo "$PATH"; echo "$ONCEFLOW_API_URL"; echo "$RUN_ATTEMPT $RUN_FENCING_TOKEN"',
      { runApi, attempt: 3 },
    );
    const [home, path, api, attempt] = lines(r);
    expect(home).toMatch(/onceflow-attempt-/);
    expect(home).not.toBe(process.env.HOME);
    expect(path).toBe(`${bin}:${process.env.PATH}`);
    expect(api).toBe('http://127.0.0.1:9/x');
    expect(attempt).toBe('3 7');
  });

  it('keeps stdout and stderr in the output tail, and reports the exit', async () => {
    const r = await exec('echo out; echo err >&2; exit 4');
    expect(r).toMatchObject({ outcome: 'failed', exitCode: 4, signal: null, timedOut: false });
    expect(r.outputTail).toContain('out\n');
    expect(r.outputTail).toContain('err\n');
    expect(r.pid).toBeGreaterThan(0);
    expect(r.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('never starts the work of an attempt whose signal was aborted before it began', async () => {
    const marker = join(dir, 'pre-aborted');
    const abort = new AbortController();
    abort.abort(new Error('lease lost'));
    const r = await exec(`sleep 1; touch '${marker}'`, {}, abort.signal);
    expect(r).toMatchObject({ outcome: 'aborted', exitCode: null, signal: 'SIGKILL' });
    await new Promise((res) => setTimeout(res, 1200));
    expect(existsSync(marker)).toBe(false);
  });

  it('kills the whole group at the timeout: transient, background children included', async () => {
    const pidFile = join(dir, 'bg.pid');
    const started = Date.now();
    const r = await exec(`sleep 30 & echo $! > '${pidFile}'; sleep 30`, { timeoutMs: 500 });
    expect(r).toMatchObject({ outcome: 'transient', timedOut: true, exitCode: null, signal: 'SIGKILL' });
    expect(Date.now() - started).toBeLessThan(5000);
    const bg = Number(readFileSync(pidFile, 'utf8'));
    await waitFor(() => !isAlive(bg), 3000, 'the background child to die');
  });

  it('the watchdog kills a command whose worker stops sending keep-alives, and not one that keeps getting them', async () => {
    let ping: (() => void) | undefined;
    const fed = setInterval(() => ping?.(), 100);
    try {
      const kept = await exec('sleep 1; echo alive', {
        guardUntil: () => Date.now() + 400,
        keepAlive: (p) => (ping = p),
      });
      expect(kept).toMatchObject({ outcome: 'success', exitCode: 0 });
      const started = Date.now();
      const starved = await exec('sleep 5; echo alive', {
        guardUntil: () => Date.now() + 400,
        keepAlive: () => undefined,
      });
      expect(starved).toMatchObject({ outcome: 'transient', exitCode: null, signal: 'SIGKILL', timedOut: false });
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      clearInterval(fed);
    }
  });

  it('fails at once, with the reason, an attempt whose workspace is outside WORKSPACE_ROOT', async () => {
    const marker = join(dir, 'outside-ran');
    const r = await exec(`touch '${marker}'`, { workspace: '/etc/onceflow-nowhere' });
    expect(r).toMatchObject({ outcome: 'failed', exitCode: null, signal: null, timedOut: false });
    expect(r.startError).toMatch(
      /^could not prepare its workspace: workspace \/etc\/onceflow-nowhere is not inside WORKSPACE_ROOT/,
    );
    expect(r.outputTail).toBe(`[onceflow] could not start the command: ${r.startError}\n`);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync('/etc/onceflow-nowhere')).toBe(false);
  });
});
