/**
 * The peer a user would pick for durable jobs on Postgres: graphile-worker 0.18 under the guarded
 * phase's duplicate load — each job added twice at once with the same job_key (its dedupe), the
 * same number of pairs in flight, the same concurrency, the same Postgres (its own schema in the
 * scratch database). Consumed by one child process (graphile-worker-process.ts); the clock stops at
 * the last execution. Counts how many jobs its task executed more than once.
 */
import { fork } from 'node:child_process';
import { resolve } from 'node:path';
import { Client } from 'pg';
import { cpuMs, peakRssMb, pool, serviceCpu, sleep } from './support';

export interface GraphileResult {
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  /** Executions beyond the first, counted by the task itself. */
  duplicatesExecuted: number;
  /** Jobs never executed (must be 0). */
  lost: number;
  workerPeakRssMb: number | null;
  workerCpuMsPerJob: number | null;
  producerCpuMsPerJob: number;
  postgresCpuMsPerJob: number | null;
  /** Jobs run through the same consumer before the clock started, and their own rate (the cold start). */
  warmup: { jobs: number; jobsPerSec: number | null };
}

export async function measureGraphile(
  databaseUrl: string,
  redisUrl: string,
  jobs: number,
  producers: number,
  concurrency: number,
  phase: string,
  warmupJobs = 0,
): Promise<GraphileResult> {
  const schema = `gw_${phase}`;
  const child = fork(resolve(__dirname, 'graphile-worker-process.js'), [], {
    env: { ...process.env, GW_DATABASE_URL: databaseUrl, GW_SCHEMA: schema, GW_CONCURRENCY: String(concurrency) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let state = { distinct: 0, total: 0, lastAt: 0 };
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  const failed = new Promise<never>((_, rej) =>
    child.once('exit', (code) => rej(new Error(`graphile-worker consumer exited (${code})`))),
  );
  failed.catch(() => undefined);
  child.on('message', (m: { ready?: boolean; distinct?: number; total?: number; lastAt?: number }) => {
    if (m.ready) ready();
    if (typeof m.total === 'number') state = { distinct: m.distinct!, total: m.total, lastAt: m.lastAt! };
  });
  const { makeWorkerUtils } = await import('graphile-worker');
  const pg = new Client({ connectionString: databaseUrl });
  try {
    await Promise.race([isReady, failed]);
    await pg.connect();
    const utils = await makeWorkerUtils({ connectionString: databaseUrl, schema, maxPoolSize: producers * 2 + 2 });
    try {
      // Jobs [from, from + n), each added twice with its job_key; resolves with the first add's
      // time once every job ran and none is left queued (a duplicate may still be waiting).
      const addAll = async (from: number, n: number): Promise<number> => {
        const start = Date.now();
        await pool(n, producers, async (i) => {
          const add = () => utils.addJob('bench', { n: from + i }, { jobKey: `job-${from + i}` });
          await Promise.all([add(), add()]);
        });
        const deadline = Date.now() + 120_000;
        for (;;) {
          if (state.distinct >= from + n) {
            const { rows } = await pg.query(`SELECT count(*)::int AS n FROM "${schema}".jobs`);
            if (rows[0].n === 0) break;
          }
          if (Date.now() > deadline) break;
          await sleep(50);
        }
        await sleep(100); // the last report
        return start;
      };
      // The warm-up: the same load through the same consumer, not measured.
      const warmStart = warmupJobs > 0 ? await addAll(0, warmupJobs) : 0;
      const warmupPerSec = warmupJobs > 0 ? warmupJobs / ((state.lastAt - warmStart) / 1000) : null;
      const workerCpu0 = cpuMs(child.pid);
      const producerCpu0 = process.cpuUsage();
      const services = await serviceCpu(databaseUrl, redisUrl);
      const t0 = await addAll(warmupJobs, jobs);
      const seconds = (state.lastAt - t0) / 1000;
      const producerCpu = process.cpuUsage(producerCpu0);
      const { postgresMs } = await services();
      const workerCpu = cpuMs(child.pid);
      return {
        jobs,
        seconds,
        jobsPerSec: jobs / seconds,
        duplicatesExecuted: state.total - state.distinct,
        lost: warmupJobs + jobs - state.distinct,
        workerPeakRssMb: peakRssMb(child.pid),
        workerCpuMsPerJob: workerCpu === null || workerCpu0 === null ? null : (workerCpu - workerCpu0) / jobs,
        producerCpuMsPerJob: (producerCpu.user + producerCpu.system) / 1000 / jobs,
        postgresCpuMsPerJob: postgresMs === null ? null : postgresMs / jobs,
        warmup: { jobs: warmupJobs, jobsPerSec: warmupPerSec },
      };
    } finally {
      await utils.release();
    }
  } finally {
    await pg.end().catch(() => undefined);
    if (child.connected) child.disconnect();
    await new Promise((r) =>
      child.exitCode === null && child.signalCode === null ? child.once('exit', r) : r(undefined),
    );
  }
}
