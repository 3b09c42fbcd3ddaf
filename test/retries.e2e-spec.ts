import { join } from 'node:path';
import {
  auth,
  closeDb,
  count,
  createProject,
  createRun,
  executions,
  startApp,
  TestApp,
  waitForStatus,
} from './support/app';
import { tempDir, testEnv } from './support/env';

describe('retries', () => {
  const countFile = join(tempDir('retries'), 'executions.log');
  let t: TestApp;
  let projectId: string;

  beforeAll(async () => {
    t = await startApp(
      testEnv('retries', countFile, {
        RUN_RETRY_BASE_DELAY_MS: '100',
        RUN_RETRY_MAX_DELAY_MS: '300',
        RUN_MAX_ATTEMPTS: '4',
      }),
    );
    projectId = (await createProject(t.http, { maxConcurrentRuns: 10 })).id;
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('transient twice, then success: SUCCESS after 3 attempts, delays under the cap', async () => {
    const run = await createRun(t.http, projectId, 'transient=2', true);
    await waitForStatus([run.id], ['SUCCESS']);
    const lines = executions(countFile).filter((e) => e.runId === run.id);
    expect(lines.filter((e) => e.kind === 'start').map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(lines.filter((e) => e.kind === 'done')).toHaveLength(1);
    const body = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(body).toMatchObject({ status: 'SUCCESS', attempts: 3, lastError: null });
    const events = (await t.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items as Array<{
      to: string;
      reason: string;
      attempt: number;
    }>;
    expect(events.map((e) => e.to)).toEqual([
      'QUEUED',
      'RUNNING',
      'RETRYING',
      'RUNNING',
      'RETRYING',
      'RUNNING',
      'SUCCESS',
    ]);
    const delays = events.filter((e) => e.to === 'RETRYING').map((e) => Number(/retry in (\d+) ms/.exec(e.reason)![1]));
    // Full jitter: delay n is uniform in [0, min(cap, base * 2^(n-1))] — ceilings 100, 200.
    expect(delays[0]).toBeLessThanOrEqual(100);
    expect(delays[1]).toBeLessThanOrEqual(200);
    // The next attempt starts no earlier than the chosen delay.
    const starts = lines.filter((e) => e.kind === 'start');
    const transients = lines.filter((e) => e.kind === 'transient');
    for (let i = 0; i < 2; i++) {
      const waitedMs = Number(starts[i + 1].atNs - transients[i].atNs) / 1e6;
      expect(waitedMs).toBeGreaterThanOrEqual(delays[i] - 5);
    }
  });

  it('transient every time: FAILED once RUN_MAX_ATTEMPTS is spent, every delay under the cap', async () => {
    const run = await createRun(t.http, projectId, 'transient=99', true);
    await waitForStatus([run.id], ['FAILED']);
    expect(count(countFile, 'start', run.id)).toBe(4);
    const events = (await t.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items as Array<{
      to: string;
      reason: string;
    }>;
    const delays = events.filter((e) => e.to === 'RETRYING').map((e) => Number(/retry in (\d+) ms/.exec(e.reason)![1]));
    expect(delays).toHaveLength(3);
    for (const d of delays) expect(d).toBeLessThanOrEqual(300);
    expect(events[events.length - 1].reason).toMatch(/attempts exhausted \(4\/4\)/);
  });

  it('permanent failure: FAILED after one attempt; /retry runs it again as a new series', async () => {
    const run = await createRun(t.http, projectId, 'fail', true);
    await waitForStatus([run.id], ['FAILED']);
    expect(count(countFile, 'start', run.id)).toBe(1);
    const failed = (await t.http.get(`/api/runs/${run.id}`).set(auth)).body;
    expect(failed).toMatchObject({ status: 'FAILED', attempts: 1, lastError: 'exit 3' });

    const retry = await t.http.post(`/api/runs/${run.id}/retry`).set(auth);
    expect(retry.status).toBe(202);
    // A new job id: Bull would silently drop a job whose id still exists (the failed series' job).
    expect(retry.body.jobId).toMatch(/\.g2$/);
    await waitForStatus([run.id], ['FAILED']);
    expect(count(countFile, 'start', run.id)).toBe(2);
    const events = (await t.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items as Array<{
      from: string;
      to: string;
    }>;
    expect(events.map((e) => e.to)).toEqual(['QUEUED', 'RUNNING', 'FAILED', 'QUEUED', 'RUNNING', 'FAILED']);
    expect((await t.http.post(`/api/runs/${run.id}/retry`).set(auth)).status).toBe(202);
    const again = await t.http.post(`/api/runs/${run.id}/retry`).set(auth);
    expect(again.status).toBe(409);
  });
});

/**
 * The cap, measured from the command's own timestamps: 8 attempts with a 200 ms base, so the
 * uncapped ceilings of the later gaps are 1.6, 3.2, 6.4 and 12.8 s and an uncapped backoff would
 * make at least one of them over a second (all four under it: p ≈ 0.002); a 200 ms cap keeps each
 * gap — the attempt's `transient` line to the next attempt's `start` line, both written by the
 * command — within the cap plus the pickup (queue, lock, claim, spawn).
 */
describe('retry delays under RUN_RETRY_MAX_DELAY_MS', () => {
  const countFile = join(tempDir('retry-cap'), 'executions.log');
  const CAP_MS = 200;
  /** Queue pickup, lock, claim and spawn after the delay; generous for a loaded 2-core box. */
  const PICKUP_MS = 800;
  let t: TestApp;

  beforeAll(async () => {
    t = await startApp(
      testEnv('retry-cap', countFile, {
        RUN_RETRY_BASE_DELAY_MS: String(CAP_MS),
        RUN_RETRY_MAX_DELAY_MS: String(CAP_MS),
        RUN_MAX_ATTEMPTS: '8',
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('keeps every gap between attempts within the cap (plus pickup), from the command’s timestamps', async () => {
    const project = await createProject(t.http, { maxConcurrentRuns: 2 });
    const run = await createRun(t.http, project.id, 'transient=99', true);
    await waitForStatus([run.id], ['FAILED'], 45_000);
    const lines = executions(countFile).filter((e) => e.runId === run.id);
    const starts = lines.filter((e) => e.kind === 'start');
    const transients = lines.filter((e) => e.kind === 'transient');
    expect(starts.map((e) => e.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(transients.map((e) => e.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const gaps = [0, 1, 2, 3, 4, 5, 6].map((i) => Number(starts[i + 1].atNs - transients[i].atNs) / 1e6);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(0);
      expect(gap).toBeLessThanOrEqual(CAP_MS + PICKUP_MS);
    }
  });
});
