import type { INestApplication } from '@nestjs/common';
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Pool } from 'pg';
import request from 'supertest';
import { createApp } from '../../src/bootstrap';
import { AppConfig } from '../../src/config/app-config';
import { API_KEY, ROOT, tempDir, testConfig, testDatabaseUrl } from './env';

export interface TestApp {
  app: INestApplication;
  config: AppConfig;
  http: ReturnType<typeof request>;
  close(): Promise<void>;
}

export async function startApp(env: Record<string, string>): Promise<TestApp> {
  const config = testConfig(env);
  const app = await createApp(config);
  await app.init();
  const http = request(app.getHttpServer());
  return { app, config, http, close: () => app.close() };
}

export const auth = { Authorization: `Bearer ${API_KEY}` };

let pool: Pool | undefined;
/** The test's own connection pool to the run's database (for assertions and fault injection). */
export function db(): Pool {
  pool ??= new Pool({ connectionString: testDatabaseUrl(), max: 4, application_name: 'onceflow-test' });
  return pool;
}
export async function closeDb(): Promise<void> {
  await pool?.end();
  pool = undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface WorkerProcess {
  child: ChildProcess;
  port: number;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * A real onceflow process (compiled dist) — for kill -9 and SIGSTOP, which need a process. It runs
 * in `cwd`, by default a fresh directory: where it would keep development credentials, so that a
 * test never writes into the working copy nor reads the developer's own.
 */
export async function startProcess(
  env: Record<string, string>,
  role = 'worker',
  opts: { cwd?: string } = {},
): Promise<WorkerProcess> {
  const main = join(ROOT, 'dist/src/main.js');
  if (!existsSync(main)) throw new Error('dist/src/main.js is missing: run `npm run build` (npm test does)');
  const port = await freePort();
  const child = spawn(process.execPath, [main], {
    cwd: opts.cwd ?? tempDir('proc'),
    env: { ...process.env, ...env, APP_ROLE: role, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`process exited early:\n${out}`);
      const res = await fetch(`http://127.0.0.1:${port}/health/ready`).catch(() => null);
      return res?.status === 200;
    },
    30_000,
    `process on :${port} ready`,
  );
  return {
    child,
    port,
    output: () => out,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill(signal);
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** A poll that wakes this much later than asked was starved of CPU, not waiting on the thing. */
const STALL_MS = 100;

/**
 * Polls until `check` is true; on timeout the error says what was awaited. Never a bare sleep.
 * Time this process could not run (a loaded CI host starving it) does not count against the
 * timeout: after such a stall our poll's timer can fire before the timer of the work it waits
 * for, and would judge that work late when it never had its turn.
 */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
  everyMs = 50,
): Promise<void> {
  let deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      lastErr = err;
      if (String(err).includes('exited early')) throw err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${String(lastErr)})` : ''}`,
      );
    const asleep = Date.now();
    await new Promise((r) => setTimeout(r, everyMs));
    const late = Date.now() - asleep - everyMs;
    if (late > STALL_MS) deadline += late;
  }
}

export interface ExecutionLine {
  kind: 'start' | 'done' | 'transient' | 'fail';
  runId: string;
  attempt: number;
  token: number;
  pid: number;
  atNs: bigint;
}

/** Lines the fake orchestrator appended: what really executed, seen from outside the app. */
export function executions(countFile: string): ExecutionLine[] {
  if (!existsSync(countFile)) return [];
  return readFileSync(countFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [kind, runId, attempt, token, pid, at] = line.split(' ');
      return {
        kind: kind as ExecutionLine['kind'],
        runId,
        attempt: Number(attempt),
        token: Number(token),
        pid: Number(pid),
        atNs: BigInt(at),
      };
    });
}

export function count(countFile: string, kind: ExecutionLine['kind'], runId?: string): number {
  return executions(countFile).filter((e) => e.kind === kind && (!runId || e.runId === runId)).length;
}

export async function createProject(
  http: TestApp['http'],
  body: Record<string, unknown> = {},
): Promise<{ id: string; name: string }> {
  const res = await http
    .post('/api/projects')
    .set(auth)
    .send({ name: `p-${Math.random().toString(36).slice(2)}`, ...body });
  if (res.status !== 201) throw new Error(`create project: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function createRun(
  http: TestApp['http'],
  projectId: string,
  requirement: string,
  dispatch = false,
): Promise<{ id: string; status: string }> {
  const res = await http.post(`/api/projects/${projectId}/runs`).set(auth).send({ requirement, dispatch });
  if (res.status !== 201) throw new Error(`create run: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function runStatus(runId: string): Promise<string> {
  const { rows } = await db().query('SELECT status FROM runs WHERE id = $1', [runId]);
  return rows[0]?.status;
}

export async function waitForStatus(runIds: string[], statuses: string[], timeoutMs = 30_000): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await db().query('SELECT count(*)::int AS n FROM runs WHERE id = ANY($1) AND status = ANY($2)', [
        runIds,
        statuses,
      ]);
      return rows[0].n === runIds.length;
    },
    timeoutMs,
    `${runIds.length} run(s) to reach ${statuses.join('/')}`,
  );
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat); // a zombie is dead, just not reaped yet
  } catch {
    return false;
  }
}

/** Blocks this process's event loop for `ms`, as on a stalled worker (GC, CPU starvation). */
export function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    /* nothing runs meanwhile: timers and I/O wait */
  }
}
