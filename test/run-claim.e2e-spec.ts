import { join } from 'node:path';
import { RunClaimService } from '../src/runs/worker/run-claim.service';
import { closeDb, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';

/**
 * The claim called directly on rows in the state each case needs. Worker role (the claim lives
 * there); nothing is ever enqueued, so no processor competes for these rows.
 */
describe('RunClaimService.claim', () => {
  const countFile = join(tempDir('claim'), 'executions.log');
  const TTL = 3000;
  let t: TestApp;
  let claims: RunClaimService;

  beforeAll(async () => {
    t = await startApp(testEnv('claim', countFile, { APP_ROLE: 'worker', RUN_LOCK_TTL_MS: String(TTL) }));
    claims = t.app.get(RunClaimService);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('claims a QUEUED run: RUNNING, one attempt, the lease, a token past both counters, and an event', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id, { status: 'QUEUED', fencing_token: 4 });
    const result = await claims.claim(id, 2, 'owner-1', 'worker-a');
    expect(result).toMatchObject({ kind: 'claimed', project, run: { id, status: 'RUNNING', from_status: 'QUEUED' } });
    const row = await runRow(id);
    expect(row).toMatchObject({ status: 'RUNNING', attempts: 1, fencing_token: '5', lease_owner: 'owner-1' });
    expect(Number(row.lease_ms)).toBeGreaterThan(TTL - 500);
    expect(Number(row.lease_ms)).toBeLessThanOrEqual(TTL);
    expect(row.started_at).not.toBeNull();
    const events = await runEvents(id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      from_status: 'QUEUED',
      to_status: 'RUNNING',
      attempt: 1,
      fencing_token: '5',
      worker_id: 'worker-a',
      reason: 'claimed',
    });
  });

  it('takes the Redis token when it is ahead of Postgres', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id, { status: 'RETRYING', attempts: 1, fencing_token: 3 });
    expect((await claims.claim(id, 1000, 'owner-2', 'worker-a')).kind).toBe('claimed');
    expect(await runRow(id)).toMatchObject({ fencing_token: '1000', attempts: 2 });
  });

  it('re-claims a RUNNING run whose lease expired, keeping its first start time', async () => {
    const project = await insertProject();
    const startedAt = new Date(Date.now() - 60_000);
    const id = await insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 7,
      lease_owner: 'dead',
      leaseMs: -1000,
      started_at: startedAt,
    });
    const result = await claims.claim(id, 1, 'owner-3', 'worker-b');
    expect(result.kind).toBe('claimed');
    const row = await runRow(id);
    expect(row).toMatchObject({ status: 'RUNNING', attempts: 2, fencing_token: '8', lease_owner: 'owner-3' });
    expect(row.started_at.getTime()).toBe(startedAt.getTime());
  });

  it('leaves a RUNNING run with a live lease alone and says when to look again', async () => {
    const project = await insertProject(5);
    const id = await insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 9,
      lease_owner: 'alive',
      leaseMs: 2000,
    });
    const result = await claims.claim(id, 1, 'owner-4', 'worker-b');
    expect(result).toMatchObject({ kind: 'later', reason: 'held by a live lease' });
    const delay = (result as { delayMs: number }).delayMs;
    expect(delay).toBeGreaterThan(1800 + 100);
    expect(delay).toBeLessThanOrEqual(2000 + 100 + 1);
    expect(await runRow(id)).toMatchObject({ attempts: 1, fencing_token: '9', lease_owner: 'alive' });
    expect(await runEvents(id)).toHaveLength(0);
  });

  it.each(['PENDING', 'SUCCESS', 'FAILED', 'CANCELLED'])('skips a %s run and changes nothing', async (status) => {
    const project = await insertProject();
    const id = await insertRun(project.id, { status });
    expect(await claims.claim(id, 1, 'owner-5', 'worker-b')).toEqual({ kind: 'skip', reason: `run is ${status}` });
    expect(await runRow(id)).toMatchObject({ status, attempts: 0, fencing_token: '0' });
    expect(await runEvents(id)).toHaveLength(0);
  });

  it('skips a finished run even with a lease left on it, or in a project at its cap (no retry later)', async () => {
    const project = await insertProject(1);
    await insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 1,
      lease_owner: 'busy',
      leaseMs: 5000,
    });
    const id = await insertRun(project.id, {
      status: 'SUCCESS',
      attempts: 1,
      fencing_token: 2,
      lease_owner: 'left-behind',
      leaseMs: 5000,
    });
    expect(await claims.claim(id, 1, 'owner-7', 'worker-b')).toEqual({ kind: 'skip', reason: 'run is SUCCESS' });
  });

  it('skips a run that does not exist', async () => {
    expect(await claims.claim('00000000-0000-4000-8000-000000000000', 1, 'o', 'w')).toEqual({
      kind: 'skip',
      reason: 'run not found',
    });
  });

  it.each(['QUEUED', 'RETRYING'])('holds a %s run back while its project is at max_concurrent_runs', async (status) => {
    const project = await insertProject(1);
    await insertRun(project.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 1,
      lease_owner: 'busy',
      leaseMs: 5000,
    });
    const id = await insertRun(project.id, { status });
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const result = await claims.claim(id, 1, 'owner-6', 'worker-b');
      expect(result).toMatchObject({ kind: 'later', reason: 'project at max_concurrent_runs' });
      delays.push((result as { delayMs: number }).delayMs);
    }
    for (const delay of delays) {
      expect(delay).toBeGreaterThanOrEqual(200);
      expect(delay).toBeLessThan(1000);
    }
    // Jittered, so that the held-back runs of a busy project do not all come back at once.
    expect(Math.max(...delays)).toBeGreaterThan(260);
    expect(await runRow(id)).toMatchObject({ status, attempts: 0 });
  });

  // The project row is locked by the first statement of the claim's round trip; the claim itself
  // takes its snapshot after that lock was granted, so it counts the claims committed before it.
  it.each([1, 2, 3])('concurrent claims never exceed a cap of %i', async (cap) => {
    for (let round = 0; round < 6; round++) {
      const project = await insertProject(cap);
      const ids = await Promise.all(Array.from({ length: 10 }, () => insertRun(project.id, { status: 'QUEUED' })));
      const results = await Promise.all(ids.map((id, i) => claims.claim(id, 1, `race-${cap}-${round}-${i}`, 'w')));
      expect(results.filter((r) => r.kind === 'claimed')).toHaveLength(cap);
      expect(results.filter((r) => r.kind === 'later')).toHaveLength(10 - cap);
    }
  });

  it('does not count expired leases, other projects, or a cap not yet reached', async () => {
    const full = await insertProject(1);
    await insertRun(full.id, { status: 'RUNNING', attempts: 1, fencing_token: 1, lease_owner: 'dead', leaseMs: -1000 });
    const other = await insertProject(1);
    await insertRun(other.id, {
      status: 'RUNNING',
      attempts: 1,
      fencing_token: 1,
      lease_owner: 'elsewhere',
      leaseMs: 5000,
    });
    expect((await claims.claim(await insertRun(full.id, { status: 'QUEUED' }), 1, 'o1', 'w')).kind).toBe('claimed');
    const two = await insertProject(2);
    await insertRun(two.id, { status: 'RUNNING', attempts: 1, fencing_token: 1, lease_owner: 'one', leaseMs: 5000 });
    expect((await claims.claim(await insertRun(two.id, { status: 'QUEUED' }), 1, 'o2', 'w')).kind).toBe('claimed');
    expect((await claims.claim(await insertRun(two.id, { status: 'QUEUED' }), 1, 'o3', 'w')).kind).toBe('later');
  });
});
