import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { join } from 'node:path';
import { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { WORKER_ID } from '../src/locks/locks.module';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { DispatchService } from '../src/runs/dispatch.service';
import { auth, closeDb, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';

/** Dispatch and /retry in the API role: the job is added but no worker takes it, so it can be read. */
describe('dispatch and retry', () => {
  const countFile = join(tempDir('dispatch'), 'executions.log');
  let t: TestApp;
  let queue: Queue;
  let locks: LockService;

  beforeAll(async () => {
    t = await startApp(testEnv('dispatch', countFile, { APP_ROLE: 'api' }));
    queue = t.app.get(getQueueToken(RUNS_QUEUE));
    locks = t.app.get(LOCK_SERVICE);
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const post = (id: string, verb: 'dispatch' | 'retry') => t.http.post(`/api/runs/${id}/${verb}`).set(auth);

  it('PENDING → QUEUED: the next generation, its job id and payload, and an event', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id);
    const res = await post(id, 'dispatch');
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ runId: id, status: 'QUEUED', jobId: `run.${id}.g1` });
    expect(await runRow(id)).toMatchObject({ status: 'QUEUED', dispatch_generation: 1 });
    const job = await queue.getJob(`run.${id}.g1`);
    expect(job?.data).toEqual({ runId: id, generation: 1 });
    const events = await runEvents(id);
    expect(events).toEqual([
      expect.objectContaining({
        from_status: 'PENDING',
        to_status: 'QUEUED',
        reason: 'dispatched',
        worker_id: t.app.get(WORKER_ID),
      }),
    ]);
  });

  it('/retry starts a FAILED run over: attempts 0, no error, not finished, a new generation and job', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id, {
      status: 'FAILED',
      attempts: 3,
      last_error: 'exit 3',
      finished_at: new Date(),
    });
    const res = await post(id, 'retry');
    expect(res.status).toBe(202);
    expect(res.body.jobId).toBe(`run.${id}.g1`);
    expect(await runRow(id)).toMatchObject({
      status: 'QUEUED',
      attempts: 0,
      last_error: null,
      finished_at: null,
      dispatch_generation: 1,
    });
    expect((await queue.getJob(`run.${id}.g1`))?.data).toEqual({ runId: id, generation: 1 });
    expect((await runEvents(id)).map((e) => [e.from_status, e.to_status, e.reason])).toEqual([
      ['FAILED', 'QUEUED', 'retry requested'],
    ]);
  });

  it('refuses while another dispatch of the run holds the producer guard, and frees the guard after each call', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id);
    const owner = await locks.enterGuard(`dispatch:${id}`, 5000);
    const busy = await post(id, 'dispatch');
    expect(busy.status).toBe(409);
    expect(busy.body.message).toBe('a dispatch of this run is already in progress');
    expect(await runRow(id)).toMatchObject({ status: 'PENDING', dispatch_generation: 0 });
    await locks.leaveGuard(`dispatch:${id}`, owner!);
    expect((await post(id, 'dispatch')).status).toBe(202);
    // The guard was left behind neither by the success nor by a refusal: each answer says why.
    expect((await post(id, 'dispatch')).body.message).toBe('run is already queued');
    expect((await post(id, 'dispatch')).body.message).toBe('run is already queued');
  });

  it.each([
    ['QUEUED', 'dispatch', 'run is already queued'],
    ['RUNNING', 'dispatch', 'run is already running'],
    ['RETRYING', 'dispatch', 'run is retrying'],
    ['SUCCESS', 'dispatch', 'run already succeeded'],
    ['FAILED', 'dispatch', 'run failed; use POST /api/runs/:id/retry'],
    ['CANCELLED', 'dispatch', 'run was cancelled'],
    ['PENDING', 'retry', 'only a FAILED run can be retried; run is PENDING'],
    ['SUCCESS', 'retry', 'only a FAILED run can be retried; run is SUCCESS'],
  ] as const)('a %s run: %s is refused with "%s" and changes nothing', async (status, verb, message) => {
    const project = await insertProject();
    const id = await insertRun(project.id, { status });
    const res = await post(id, verb);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ statusCode: 409, error: 'Conflict', message });
    expect(await runRow(id)).toMatchObject({ status, dispatch_generation: 0 });
    expect(await runEvents(id)).toHaveLength(0);
  });

  it('answers 404 for an unknown run, dispatch or retry', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await post(unknown, 'dispatch')).status).toBe(404);
    expect((await post(unknown, 'retry')).status).toBe(404);
  });

  it('enqueue() is safe to repeat (one job per generation) and answers QUEUED', async () => {
    const project = await insertProject();
    const id = await insertRun(project.id, { status: 'QUEUED' });
    const dispatch = t.app.get(DispatchService);
    const answers = await Promise.all([1, 2, 3].map(() => dispatch.enqueue({ id, dispatch_generation: 4 })));
    for (const a of answers) expect(a).toEqual({ runId: id, status: 'QUEUED', jobId: `run.${id}.g4` });
    const jobs = await queue.getJobs(['waiting', 'delayed']);
    expect(jobs.filter((j) => j.data.runId === id).map((j) => j.id)).toEqual([`run.${id}.g4`]);
  });
});
