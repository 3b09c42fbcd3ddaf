import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { join } from 'node:path';
import { runJobId } from '../src/queues/job-ids';
import { RUNS_QUEUE } from '../src/queues/queue-names';
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
 * Real worker processes (compiled app) against the real Postgres and Redis; faults are injected
 * with signals. Executions are counted from the orchestrator's own file.
 */
describe('worker crashes and freezes', () => {
  const countFile = join(tempDir('crash'), 'executions.log');
  let env: Record<string, string>;
  let api: TestApp;
  let workers: WorkerProcess[] = [];

  beforeAll(async () => {
    env = testEnv('crash', countFile, { REDIS_PREFIX: uniquePrefix('crash'), WORKER_CONCURRENCY: '2' });
    api = await startApp({ ...env, APP_ROLE: 'api' });
  });
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    workers = [];
  });
  afterAll(async () => {
    await api.close();
    await closeDb();
  });

  async function holderPid(runId: string): Promise<number> {
    let owner = '';
    await waitFor(
      async () => {
        const { rows } = await db().query(`SELECT lease_owner FROM runs WHERE id = $1 AND status = 'RUNNING'`, [runId]);
        owner = rows[0]?.lease_owner ?? '';
        return owner !== '';
      },
      15_000,
      'the run to be claimed',
    );
    return Number(owner.split(':')[1]);
  }

  it('kill -9 of the worker mid-run: the run completes once on another worker; the killed attempt never finishes', async () => {
    workers = await Promise.all([startProcess(env), startProcess(env)]);
    const project = await createProject(api.http);
    const run = await createRun(api.http, project.id, 'sleep=3', true);
    await waitFor(() => count(countFile, 'start', run.id) === 1, 15_000, 'the first attempt to start');
    const victimPid = await holderPid(run.id);
    const victim = workers.find((w) => w.child.pid === victimPid)!;
    expect(victim).toBeDefined();
    const firstCommand = executions(countFile).find((e) => e.runId === run.id)!;
    victim.child.kill('SIGKILL');

    // The watchdog kills the orchestrator of the dead worker at once, not after its 3 s.
    await waitFor(() => !isAlive(firstCommand.pid), 2000, 'the killed worker’s command to die');
    await waitForStatus([run.id], ['SUCCESS'], 30_000);
    const lines = executions(countFile).filter((e) => e.runId === run.id);
    expect(lines.filter((e) => e.kind === 'done')).toHaveLength(1);
    expect(lines.find((e) => e.kind === 'done')!.attempt).toBe(2);
    expect(lines.filter((e) => e.kind === 'done' && e.attempt === 1)).toHaveLength(0);
    const { rows } = await db().query(`SELECT attempts, lease_owner FROM runs WHERE id = $1`, [run.id]);
    expect(rows[0].attempts).toBe(2);
  });

  it('a worker frozen past its lock TTL: the other worker’s result stands, the stale one writes nothing and kills its command on waking', async () => {
    workers = await Promise.all([startProcess(env), startProcess(env)]);
    const project = await createProject(api.http);
    const run = await createRun(api.http, project.id, 'sleep=5', true);
    await waitFor(() => count(countFile, 'start', run.id) === 1, 15_000, 'the first attempt to start');
    const frozenPid = await holderPid(run.id);
    const frozen = workers.find((w) => w.child.pid === frozenPid)!;
    const staleCommand = executions(countFile).find((e) => e.runId === run.id)!;
    frozen.child.kill('SIGSTOP');

    await waitFor(() => count(countFile, 'start', run.id) === 2, 30_000, 'another worker to take the run over');
    const takeover = executions(countFile).filter((e) => e.runId === run.id && e.kind === 'start')[1];
    expect(takeover.token).toBeGreaterThan(staleCommand.token);
    // The frozen worker sent no keep-alive: its watchdog killed the command before its lock lapsed,
    // so the two attempts never overlap even while the worker stays frozen.
    expect(isAlive(staleCommand.pid)).toBe(false);
    expect(executions(countFile).filter((e) => e.runId === run.id && e.kind === 'done')).toHaveLength(0);
    frozen.child.kill('SIGCONT');
    // On waking, its heartbeat is late: it kills its command before that command could finish.
    await waitFor(() => !isAlive(staleCommand.pid), 3000, 'the stale command to be killed');
    await waitForStatus([run.id], ['SUCCESS'], 30_000);
    const done = executions(countFile).filter((e) => e.runId === run.id && e.kind === 'done');
    expect(done).toHaveLength(1);
    expect(done[0].token).toBe(takeover.token);
    const { rows } = await db().query(`SELECT fencing_token, status FROM runs WHERE id = $1`, [run.id]);
    expect(Number(rows[0].fencing_token)).toBe(takeover.token);
    const events = (await api.http.get(`/api/runs/${run.id}/events`).set(auth)).body.items as Array<{
      to: string;
      fencingToken: number;
    }>;
    // Nothing was written with the stale token after the takeover's claim.
    const takeoverIdx = events.findIndex((e) => e.to === 'RUNNING' && e.fencingToken === takeover.token);
    expect(events.slice(takeoverIdx).every((e) => e.fencingToken === takeover.token)).toBe(true);
    expect(events.map((e) => e.to)).toEqual(['QUEUED', 'RUNNING', 'RUNNING', 'SUCCESS']);
  });

  it('the same run handed to two worker processes at once executes once', async () => {
    workers = await Promise.all([startProcess(env), startProcess(env)]);
    const project = await createProject(api.http, { maxConcurrentRuns: 5 });
    const run = await createRun(api.http, project.id, 'sleep=1', true);
    // Two more jobs for the same dispatch, as a redelivery or a buggy producer would make.
    const queue = api.app.get<Queue>(getQueueToken(RUNS_QUEUE));
    await Promise.all([
      queue.add({ runId: run.id, generation: 1 }, { jobId: `${runJobId(run.id, 1)}.dup-a` }),
      queue.add({ runId: run.id, generation: 1 }, { jobId: `${runJobId(run.id, 1)}.dup-b` }),
    ]);
    await waitForStatus([run.id], ['SUCCESS'], 20_000);
    await waitFor(
      async () =>
        (await queue.getJobCounts()).delayed +
          (await queue.getJobCounts()).active +
          (await queue.getJobCounts()).waiting ===
        0,
      20_000,
      'the duplicate jobs to be settled',
    );
    expect(count(countFile, 'start', run.id)).toBe(1);
    expect(count(countFile, 'done', run.id)).toBe(1);
  });
});
