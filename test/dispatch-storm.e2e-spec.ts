import { join } from 'node:path';
import { auth, closeDb, count, createProject, createRun, startApp, TestApp, waitForStatus } from './support/app';
import { tempDir, testEnv } from './support/env';

/** 50 runs x 10 concurrent dispatches: exactly 50 executions, counted by the command itself. */
describe('dispatch storm', () => {
  const countFile = join(tempDir('storm'), 'executions.log');
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(testEnv('storm', countFile, { WORKER_CONCURRENCY: '8' }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('executes each run once however often it is dispatched', async () => {
    const project = await createProject(t.http, { maxConcurrentRuns: 50 });
    const runs = await Promise.all(
      Array.from({ length: 50 }, (_, i) => createRun(t.http, project.id, `storm run ${i}`)),
    );
    const answers = await Promise.all(
      runs.flatMap((run) => Array.from({ length: 10 }, () => t.http.post(`/api/runs/${run.id}/dispatch`).set(auth))),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(50);
    expect(statuses.filter((s) => s === 409)).toHaveLength(450);
    for (const a of answers.filter((x) => x.status === 409)) {
      expect(a.body).toMatchObject({ statusCode: 409, error: 'Conflict' });
      expect(typeof a.body.message).toBe('string');
    }
    const accepted = answers.filter((a) => a.status === 202).map((a) => a.body.runId);
    expect(new Set(accepted).size).toBe(50);

    await waitForStatus(
      runs.map((r) => r.id),
      ['SUCCESS'],
      60_000,
    );
    // Counted per run of this file: the suite's files share one database, and this app's
    // reconciler rightly adopts runs an earlier file left QUEUED (it executes them once, into this
    // file's log) — as one deployment would.
    for (const run of runs) {
      expect(count(countFile, 'start', run.id)).toBe(1);
      expect(count(countFile, 'done', run.id)).toBe(1);
    }

    // A dispatch of a finished run is refused with the reason.
    const again = await t.http.post(`/api/runs/${runs[0].id}/dispatch`).set(auth);
    expect(again.status).toBe(409);
    expect(again.body.message).toMatch(/succeeded/);
  });
});
