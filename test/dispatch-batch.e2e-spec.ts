import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { MetricsService } from '../src/metrics/metrics.service';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { DISPATCH_GUARD_TTL_MS, dispatchGuardKey } from '../src/runs/dispatch-rules';
import { DispatchService } from '../src/runs/dispatch.service';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { batchSizeDeltas, whileRunsLocked } from './support/pg-observe';
import { insertProject, insertRun, runEvents, runRow } from './support/run-rows';

type Outcome = { status: 'fulfilled'; value: unknown } | { status: 'rejected'; reason: unknown };

/**
 * Group commit of single dispatches: the dispatches a process is asked for in one turn of the
 * event loop go out as one bulk dispatch, and each caller still gets the answer its own dispatch
 * would have had — also when one run of the batch is refused, when one row fails, and when the
 * connection running the batch is dropped. (No worker runs here: the jobs stay in the queue.)
 */
describe('dispatch batches (group commit)', () => {
  let t: TestApp;
  let dispatcher: DispatchService;
  let queue: Queue;

  beforeAll(async () => {
    t = await startApp(testEnv('dbatch', join(tempDir('dbatch'), 'executions.log'), { APP_ROLE: 'api' }));
    dispatcher = t.app.get(DispatchService);
    queue = t.app.get(getQueueToken(RUNS_QUEUE));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const batches = batchSizeDeltas(() => t.app.get(MetricsService).dispatchBatchSize, 'onceflow_dispatch_batch_size');
  const pending = (projectId: string, n: number) => Promise.all(Array.from({ length: n }, () => insertRun(projectId)));
  const dispatchAll = (ids: string[]) => Promise.allSettled(ids.map((id) => dispatcher.dispatch(id)));

  /** Dispatched once, as its own dispatch leaves it: QUEUED at generation 1, one event, one job. */
  async function expectQueuedOnce(runId: string, outcome: Outcome) {
    const jobId = `run.${runId}.g1`;
    expect(outcome).toEqual({ status: 'fulfilled', value: { runId, status: 'QUEUED', jobId } });
    expect(await runRow(runId)).toMatchObject({ status: 'QUEUED', dispatch_generation: 1 });
    expect((await runEvents(runId)).map((e) => [e.from_status, e.to_status, e.reason])).toEqual([
      ['PENDING', 'QUEUED', 'dispatched'],
    ]);
    expect((await queue.getJob(jobId))?.data).toEqual({ runId, generation: 1 });
  }

  async function expectUntouched(runId: string, status = 'PENDING') {
    expect(await runRow(runId)).toMatchObject({ status, dispatch_generation: 0 });
    expect(await runEvents(runId)).toHaveLength(0);
    expect(await queue.getJob(`run.${runId}.g1`)).toBeNull();
  }

  const refused = (code: string, message: RegExp | string) => ({
    status: 'rejected',
    reason: expect.objectContaining({ code, message: expect.stringMatching(message) }),
  });

  it('40 dispatches at once share one statement, and each is answered with its own run and job', async () => {
    const project = await insertProject(50);
    const ids = await pending(project.id, 40);
    await batches();
    const outcomes = await dispatchAll(ids);
    expect(await batches()).toEqual({ statements: 1, rows: 40 });
    for (const [i, id] of ids.entries()) await expectQueuedOnce(id, outcomes[i]);
  });

  it('Redis lost its scripts under an open connection (SCRIPT FLUSH): every dispatch of the batch still gets its job', async () => {
    const project = await insertProject(50);
    const [first, ...ids] = await pending(project.id, 13);
    // One batch before: this connection has sent the add script, so a MULTI no longer carries it.
    await expectQueuedOnce(first, (await dispatchAll([first]))[0]);
    await queue.client.script('FLUSH');
    const outcomes = await dispatchAll(ids);
    for (const [i, id] of ids.entries()) await expectQueuedOnce(id, outcomes[i]);
  });

  it('a mixed batch: each caller gets the answer its dispatch alone would get, the others are queued', async () => {
    const project = await insertProject(50);
    const [a, b, c] = await pending(project.id, 3);
    const queued = await insertRun(project.id, { status: 'QUEUED' });
    const succeeded = await insertRun(project.id, { status: 'SUCCESS', attempts: 1 });
    const guarded = await insertRun(project.id);
    const missing = randomUUID();
    const locks = t.app.get<LockService>(LOCK_SERVICE);
    const owner = await locks.enterGuard(dispatchGuardKey(guarded), DISPATCH_GUARD_TTL_MS);
    try {
      await batches();
      const outcomes = await dispatchAll([a, queued, missing, b, succeeded, guarded, c.toUpperCase()]);
      expect(await batches()).toEqual({ statements: 1, rows: 7 });
      expect(outcomes[1]).toMatchObject(refused('RUN_NOT_DISPATCHABLE', 'run is already queued'));
      expect(outcomes[2]).toMatchObject(refused('RUN_NOT_FOUND', `run ${missing} not found`));
      expect(outcomes[4]).toMatchObject(refused('RUN_NOT_DISPATCHABLE', 'run already succeeded'));
      expect(outcomes[5]).toMatchObject(refused('DISPATCH_IN_PROGRESS', 'already in progress'));
      await expectQueuedOnce(a, outcomes[0]);
      await expectQueuedOnce(b, outcomes[3]);
      // An id in upper case names the same run; it is answered as Postgres spells it.
      await expectQueuedOnce(c, outcomes[6]);
      await expectUntouched(guarded);
      expect(await runEvents(queued)).toHaveLength(0);
    } finally {
      await locks.leaveGuard(dispatchGuardKey(guarded), owner!);
    }
  });

  it('two dispatches of one run in one turn: one queues it, the twin is refused in this process, in no batch', async () => {
    const project = await insertProject(50);
    const [run, other] = await pending(project.id, 2);
    await batches();
    const outcomes = await dispatchAll([run, other, run]);
    expect(await batches()).toEqual({ statements: 1, rows: 2 });
    await expectQueuedOnce(run, outcomes[0]);
    expect(outcomes[2]).toMatchObject(refused('DISPATCH_IN_PROGRESS', 'already in progress'));
    await expectQueuedOnce(other, outcomes[1]);
  });

  it('a storm of one run from one process: one guard round trip in all, every twin refused without one', async () => {
    const project = await insertProject(50);
    const [run] = await pending(project.id, 1);
    const redis = (
      t.app.get<LockService>(LOCK_SERVICE) as unknown as { redis: { evalsha: (...a: unknown[]) => unknown } }
    ).redis;
    const evalsha = redis.evalsha.bind(redis);
    const scripts: unknown[][] = [];
    redis.evalsha = (...args: unknown[]) => {
      scripts.push(args);
      return evalsha(...args);
    };
    try {
      // Twins in the same turn, and twins while the first is already out (a later turn).
      const first = dispatchAll(Array.from({ length: 10 }, () => run));
      await new Promise((r) => setImmediate(r));
      const later = await dispatchAll(Array.from({ length: 10 }, () => run));
      const outcomes = [...(await first), ...later];
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      for (const o of outcomes.filter((x) => x.status === 'rejected')) {
        expect(o).toMatchObject(refused('DISPATCH_IN_PROGRESS', 'already in progress'));
      }
      await expectQueuedOnce(run, outcomes[0]);
      // The first dispatch's guard taken and left: two scripts, each naming this run's guard alone.
      expect(scripts).toHaveLength(2);
      for (const args of scripts) expect(args.filter((a) => String(a).endsWith(dispatchGuardKey(run)))).toHaveLength(1);
    } finally {
      redis.evalsha = evalsha;
    }
    // Once answered, the run is no longer in flight here: the next dispatch reaches Postgres.
    expect(await dispatcher.dispatchOrRefuse(run)).toMatchObject({ code: 'RUN_NOT_DISPATCHABLE' });
  });

  it('dispatchOrRefuse answers a twin dispatch with the refusal as a value, the same code and message dispatch() throws', async () => {
    const project = await insertProject(50);
    const [run] = await pending(project.id, 1);
    const [a, b] = await Promise.all([dispatcher.dispatchOrRefuse(run), dispatcher.dispatchOrRefuse(run)]);
    const [won, refused] = 'status' in a ? [a, b] : [b, a];
    expect(won).toMatchObject({ runId: run, status: 'QUEUED' });
    expect(refused).toEqual({
      code: expect.stringMatching(/^(DISPATCH_IN_PROGRESS|RUN_NOT_DISPATCHABLE)$/),
      message: expect.any(String),
    });
    expect(refused).not.toBeInstanceOf(Error);
    const thrown = await dispatcher.dispatch(run).catch((e: unknown) => e);
    expect(thrown).toMatchObject({ code: 'RUN_NOT_DISPATCHABLE' });
    expect(await dispatcher.dispatchOrRefuse(run)).toEqual({
      code: 'RUN_NOT_DISPATCHABLE',
      message: (thrown as Error).message,
    });
  });

  it('a row the database refuses fails only its own caller; the rest of its batch is queued', async () => {
    const project = await insertProject(50);
    const ids = await pending(project.id, 4);
    // A generation at the integer's limit cannot be bumped (22003): a fault of that one row.
    await db().query('UPDATE runs SET dispatch_generation = 2147483647 WHERE id = $1', [ids[1]]);
    await batches();
    const outcomes = await dispatchAll(ids);
    // The failed statement, then each run alone.
    expect(await batches()).toEqual({ statements: 5, rows: 8 });
    expect(outcomes[1]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ code: '22003' }) });
    expect(await runRow(ids[1])).toMatchObject({ status: 'PENDING', dispatch_generation: 2147483647 });
    for (const i of [0, 2, 3]) await expectQueuedOnce(ids[i], outcomes[i]);
  });

  it('a connection dropped mid-batch: every caller gets the error, nothing is half done, and a retry queues each run once', async () => {
    const project = await insertProject(50);
    const ids = await pending(project.id, 10);
    await batches();
    const outcomes: Outcome[] = await whileRunsLocked(
      ids,
      () => dispatchAll(ids),
      async (_tx, pid) => {
        expect(await batches()).toEqual({ statements: 1, rows: 10 });
        await db().query('SELECT pg_terminate_backend($1)', [pid]);
      },
    );
    for (const o of outcomes)
      expect(o).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ code: '57P01' }) });
    for (const id of ids) await expectUntouched(id);
    // The guards were left: the retry is not refused as "in progress".
    const retried = await dispatchAll(ids);
    for (const [i, id] of ids.entries()) await expectQueuedOnce(id, retried[i]);
  });
});
