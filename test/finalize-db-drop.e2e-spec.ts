import { join } from 'node:path';
import { RunFinalizer } from '../src/runs/worker/run-finalizer';
import {
  auth,
  closeDb,
  count,
  createProject,
  createRun,
  db,
  startApp,
  TestApp,
  waitFor,
  waitForStatus,
} from './support/app';
import { tempDir, testEnv } from './support/env';

/**
 * The finalize commit survives dropped database connections: while the command finishes, every
 * connection of the app is terminated again and again (pg_terminate_backend), so the finalize
 * meets dead connections and must retry. Without the retry the run would be re-executed after its
 * lease expired (or stay RUNNING). The test proves the fault landed — a finalize of the run was
 * cut off by a connection error and written by a later try — and runs another run when the
 * killing happened to miss every finalize. (`run-finalize.e2e-spec.ts` drives the same retry
 * deterministically, one terminated backend at a time.)
 */
describe('finalize under dropped Postgres connections', () => {
  const countFile = join(tempDir('fin'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(testEnv('fin', countFile, { RUN_LOCK_TTL_MS: '3000' }));
  });
  afterAll(async () => {
    jest.restoreAllMocks();
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

  it('ends SUCCESS (not stuck RUNNING, not executed twice) after a finalize cut off by a dropped connection', async () => {
    // Each try of the finalize's one statement, per run: 'written', 'fenced' or the error that cut it off.
    const tries = new Map<string, string[]>();
    const finalizer = t.app.get(RunFinalizer) as unknown as {
      writeOnce(req: { runId: string }): Promise<{ kind: 'written' | 'fenced' }>;
    };
    const writeOnce = finalizer.writeOnce.bind(finalizer);
    jest.spyOn(finalizer, 'writeOnce').mockImplementation(async (req) => {
      const seen = tries.get(req.runId) ?? [];
      tries.set(req.runId, seen);
      try {
        const result = await writeOnce(req);
        seen.push(result.kind);
        return result;
      } catch (err) {
        seen.push(`error: ${String(err)}`);
        throw err;
      }
    });
    const project = await createProject(t.http);
    const cutOff: string[] = [];
    for (let round = 0; round < 5 && cutOff.length === 0; round++) {
      const run = await createRun(t.http, project.id, 'sleep=1', true);
      await waitFor(() => count(countFile, 'start', run.id) === 1, 10_000, 'the command to start');
      // Kill every app connection every few ms from before the 1 s command ends until its finalize
      // was cut off (and a little longer, so that retries meet dead connections too) or written.
      await new Promise((r) => setTimeout(r, 500));
      let killed = 0;
      let firstCut = 0;
      const until = Date.now() + 5000;
      for (;;) {
        const seen = tries.get(run.id) ?? [];
        if (!firstCut && seen.some((x) => x.startsWith('error'))) firstCut = Date.now();
        if (seen.includes('written') || Date.now() > until || (firstCut && Date.now() - firstCut > 300)) break;
        killed += await terminateAppConnections();
        await new Promise((r) => setTimeout(r, 3));
      }
      expect(killed).toBeGreaterThan(0);
      await waitForStatus([run.id], ['SUCCESS'], 20_000);
      expect(count(countFile, 'start', run.id)).toBe(1);
      expect(count(countFile, 'done', run.id)).toBe(1);
      expect((await t.http.get(`/api/runs/${run.id}`).set(auth)).body).toMatchObject({
        status: 'SUCCESS',
        attempts: 1,
      });
      const seen = tries.get(run.id) ?? [];
      if (seen[0]?.startsWith('error') && seen[seen.length - 1] === 'written') cutOff.push(run.id);
    }
    // The fault landed: at least one finalize was cut off and then written by its retry.
    expect(cutOff).toHaveLength(1);
  });
});
