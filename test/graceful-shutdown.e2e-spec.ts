import { join } from 'node:path';
import {
  auth,
  closeDb,
  count,
  createProject,
  createRun,
  db,
  executions,
  isAlive,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  waitForStatus,
  WorkerProcess,
} from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';

/**
 * SIGTERM hands a running run over at once: the worker kills its command, puts the run back
 * (RETRYING, attempt not counted), releases the lock and exits; another worker starts the run
 * long before the lock TTL (20 s here) could have expired.
 */
describe('graceful shutdown', () => {
  const countFile = join(tempDir('term'), 'executions.log');
  let env: Record<string, string>;
  let api: TestApp;
  let workers: WorkerProcess[] = [];

  beforeAll(async () => {
    env = testEnv('term', countFile, {
      REDIS_PREFIX: uniquePrefix('term'),
      RUN_LOCK_TTL_MS: '20000',
      QUEUE_LOCK_DURATION_MS: '20000',
      QUEUE_STALLED_INTERVAL_MS: '20000',
    });
    api = await startApp({ ...env, APP_ROLE: 'api' });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    await api.close();
    await closeDb();
  });

  it('SIGTERM: command killed, run handed to another worker at once, finished once', async () => {
    workers = await Promise.all([startProcess(env), startProcess(env)]);
    const project = await createProject(api.http);
    const run = await createRun(api.http, project.id, 'sleep=4', true);
    await waitFor(() => count(countFile, 'start', run.id) === 1, 15_000, 'the first attempt to start');
    const { rows } = await db().query('SELECT lease_owner FROM runs WHERE id = $1', [run.id]);
    const holder = workers.find((w) => w.child.pid === Number(rows[0].lease_owner.split(':')[1]))!;
    const first = executions(countFile).find((e) => e.runId === run.id)!;

    const termAt = Date.now();
    const exited = new Promise<string>((resolve) =>
      holder.child.once('exit', (code, signal) => resolve(`${code}/${signal}`)),
    );
    holder.child.kill('SIGTERM');
    // Nest re-raises the signal once its shutdown hooks have run.
    expect(['0/null', 'null/SIGTERM']).toContain(await exited);
    expect(Date.now() - termAt).toBeLessThan(10_000);
    expect(isAlive(first.pid)).toBe(false);

    await waitFor(() => count(countFile, 'start', run.id) === 2, 8000, 'another worker to take the run over');
    // Far sooner than the 20 s lock TTL: the lock was released, not left to expire.
    expect(Date.now() - termAt).toBeLessThan(8000);
    await waitForStatus([run.id], ['SUCCESS'], 20_000);
    const lines = executions(countFile).filter((e) => e.runId === run.id);
    expect(lines.filter((e) => e.kind === 'done')).toHaveLength(1);
    expect(lines.filter((e) => e.kind === 'done')[0].attempt).toBe(1);
    const events = (await api.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items as Array<{
      to: string;
      reason: string;
    }>;
    expect(events.map((e) => e.to)).toEqual(['QUEUED', 'RUNNING', 'RETRYING', 'RUNNING', 'SUCCESS']);
    expect(events[2].reason).toMatch(/handed over/);
  });
});
