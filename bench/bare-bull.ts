/**
 * Baseline: plain Bull no-op jobs/s on the same Redis with onceflow's queue settings and worker
 * concurrency, consumed by one child process (bare-bull-worker.ts; or several, each with that
 * concurrency), produced from this process with the same number of adds in flight as the guarded
 * phase's dispatches.
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import Bull from 'bull';
import type { AppConfig } from '../src/config/app-config';
import { queueOptions } from '../src/queues/queue-settings';
import { cpuMs, MachineCpu, machineCpu, peakRssMb, pool, serviceCpu } from './support';

export interface BareBullResult {
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  workerPeakRssMb: number | null;
  /** Consumer processes. */
  consumers: number;
  /** CPU ms the consumer processes used per job; null off Linux. */
  workerCpuMsPerJob: number | null;
  producerCpuMsPerJob: number;
  /** CPU ms of the whole Redis server per job (shared: other users add to it). */
  redisCpuMsPerJob: number;
  /** The whole machine over the measured window. */
  machine: MachineCpu | null;
  /** Jobs run through the same consumer before the clock started, and their own rate (the cold start). */
  warmup: { jobs: number; jobsPerSec: number | null };
}

/**
 * What the consumer's handler does: nothing; fork `sh -c true` and wait for it (the full path's
 * baseline); or take and release the job's run lock (bare Bull plus onceflow's run lock).
 */
export type BareMode = 'noop' | 'fork' | 'lock';

export async function measureBareBull(
  config: AppConfig,
  jobs: number,
  producerConcurrency: number,
  mode: BareMode = 'noop',
  warmupJobs = 0,
  consumers = 1,
): Promise<BareBullResult> {
  const queueName = `bare_${randomUUID().slice(0, 8)}`;
  const done = new Array<number>(consumers).fill(0);
  let lastAt = 0;
  const children = done.map((_, k) => {
    const child = fork(resolve(__dirname, 'bare-bull-worker.js'), [], {
      env: {
        ...process.env,
        REDIS_URL: config.redis.url,
        REDIS_PREFIX: config.redis.prefix,
        BARE_QUEUE: queueName,
        WORKER_CONCURRENCY: String(config.worker.concurrency),
        BARE_MODE: mode,
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ready = new Promise<void>((r) =>
      child.on('message', (m: { ready?: boolean; completed?: number; lastAt?: number }) => {
        if (m.ready) r();
        if (typeof m.completed === 'number') done[k] = m.completed;
        if (typeof m.lastAt === 'number') lastAt = Math.max(lastAt, m.lastAt);
      }),
    );
    return { child, ready };
  });
  const completedJobs = () => done.reduce((a, b) => a + b, 0);
  const workerCpuMs = () => {
    const each = children.map((c) => cpuMs(c.child.pid));
    return each.includes(null) ? null : (each as number[]).reduce((a, b) => a + b, 0);
  };
  const producer = new Bull(queueName, queueOptions(config));
  try {
    await Promise.all([...children.map((c) => c.ready), producer.isReady()]);
    // Same payload shape and job id length as a run's job.
    const add = (id: string) => producer.add({ runId: id, generation: 1 }, { jobId: `run.${id}.g1` });
    const addAll = async (n: number, until: number): Promise<number> => {
      const ids = Array.from({ length: n }, () => randomUUID());
      const start = Date.now();
      await pool(n, producerConcurrency, (i) => add(ids[i]));
      const deadline = Date.now() + 120_000;
      while (completedJobs() < until) {
        if (Date.now() > deadline)
          throw new Error(`bare Bull: only ${completedJobs()}/${until} jobs completed in 120 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return start;
    };
    // The warm-up: the same jobs through the same consumers, not measured.
    const warmStart = warmupJobs > 0 ? await addAll(warmupJobs, warmupJobs) : 0;
    const warmupPerSec = warmupJobs > 0 ? warmupJobs / ((lastAt - warmStart) / 1000) : null;
    const workerCpu0 = workerCpuMs();
    const producerCpu0 = process.cpuUsage();
    const services = await serviceCpu(null, config.redis.url);
    const machine = machineCpu();
    const t0 = await addAll(jobs, warmupJobs + jobs);
    const machineUsed = machine();
    const seconds = (lastAt - t0) / 1000;
    const producerCpu = process.cpuUsage(producerCpu0);
    const { redisMs } = await services();
    const workerCpu = workerCpuMs();
    const rss = children.map((c) => peakRssMb(c.child.pid));
    return {
      jobs,
      seconds,
      jobsPerSec: jobs / seconds,
      consumers,
      workerPeakRssMb: rss.includes(null) ? null : Math.max(...(rss as number[])),
      workerCpuMsPerJob: workerCpu === null || workerCpu0 === null ? null : (workerCpu - workerCpu0) / jobs,
      producerCpuMsPerJob: (producerCpu.user + producerCpu.system) / 1000 / jobs,
      redisCpuMsPerJob: redisMs / jobs,
      machine: machineUsed,
      warmup: { jobs: warmupJobs, jobsPerSec: warmupPerSec },
    };
  } finally {
    await producer.close();
    await Promise.all(
      children.map(({ child }) => {
        child.disconnect();
        return new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(undefined)));
      }),
    );
  }
}
