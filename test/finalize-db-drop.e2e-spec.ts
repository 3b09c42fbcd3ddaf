import { join } from 'node:path';
import { auth, closeDb, count, createProject, createRun, db, startApp, TestApp, waitFor, waitForStatus } from './support/app';
import { tempDir, testEnv } from './support/env';

/**
 * The finalize commit survives dropped database connections: while the command finishes, every
 * connection of the app is terminated again and again (pg_terminate_backend), so the finalize
 * meets dead connections and must retry. Without the retry the run would be re-executed after its
 * lease expired (or stay RUNNING).
 */
describe('finalize under dropped Postgres connections', () => {
  const countFile = join(tempDir('fin'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(testEnv('fin', countFile, { RUN_LOCK_TTL_MS: '3000' }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  async function terminateAppConnections(): Promise<number> {
    const { rows } = await db().query(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'onceflow' AND pid <> pg_backend_pid()`,
    );
    return rows[0].n;
  }

  it('ends SUCCESS (not stuck RUNNING, not executed twice)', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'sleep=1', true);
    await waitFor(() => count(countFile, 'start', run.id) === 1, 10_000, 'the command to start');
    let killed = 0;
    // Kill every app connection every few ms from before the 1 s command ends until well after.
    const started = Date.now();
    while (Date.now() - started < 500) await new Promise((r) => setTimeout(r, 10));
    let doneSeenWhileKilling = false;
    const until = Date.now() + 2000;
    while (Date.now() < until) {
      killed += await terminateAppConnections();
      doneSeenWhileKilling ||= count(countFile, 'done', run.id) === 1;
      await new Promise((r) => setTimeout(r, 3));
    }
    expect(killed).toBeGreaterThan(0);
    expect(doneSeenWhileKilling).toBe(true);
    await waitForStatus([run.id], ['SUCCESS'], 20_000);
    expect(count(countFile, 'start', run.id)).toBe(1);
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body).toMatchObject({ status: 'SUCCESS', attempts: 1 });
  });
});
