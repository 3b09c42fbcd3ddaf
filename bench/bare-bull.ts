/**
 * Baseline: plain Bull no-op jobs/s on the same Redis with onceflow's queue settings and worker
 * concurrency, consumed by one child process (bare-bull-worker.ts), produced from this process
 * with the same number of adds in flight as the guarded phase's dispatches.
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import Bull from 'bull';
import type { AppConfig } from '../src/config/app-config';
import { queueOptions } from '../src/queues/queue-settings';
import { cpuMs, peakRssMb, pool, serviceCpu } from './support';

export interface BareBullResult {
  jobs: number;
  seconds: number;
  jobsPerSec: number;
  workerPeakRssMb: number | null;
  /** CPU ms the consumer process used per job; null off Linux. */
  workerCpuMsPerJob: number | null;
  producerCpuMsPerJob: number;
  /** CPU ms of the whole Redis server per job (shared: other users add to it). */
  redisCpuMsPerJob: number;
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
): Promise<BareBullResult> {
  const queueName = `bare_${randomUUID().slice(0, 8)}`;
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
  let completed = 0;
  let lastAt = 0;
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  child.on('message', (m: { ready?: boolean; completed?: number; lastAt?: number }) => {
    if (m.ready) ready();
    if (typeof m.completed === 'number') completed = m.completed;
    if (typeof m.lastAt === 'number') lastAt = m.lastAt;
  });
  const producer = new Bull(queueName, queueOptions(config));
  try {
    await Promise.all([isReady, producer.isReady()]);
    // Same payload shape and job id length as a run's job.
    const ids = Array.from({ length: jobs }, () => randomUUID());
    const workerCpu0 = cpuMs(child.pid);
    const producerCpu0 = process.cpuUsage();
    const services = await serviceCpu(null, config.redis.url);
    const t0 = Date.now();
    await pool(jobs, producerConcurrency, (i) =>
      producer.add({ runId: ids[i], generation: 1 }, { jobId: `run.${ids[i]}.g1` }),
    );
    const deadline = Date.now() + 120_000;
    while (completed < jobs) {
      if (Date.now() > deadline) throw new Error(`bare Bull: only ${completed}/${jobs} jobs completed in 120 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const seconds = (lastAt - t0) / 1000;
    const producerCpu = process.cpuUsage(producerCpu0);
    const { redisMs } = await services();
    const workerCpu = cpuMs(child.pid);
    return {
      jobs,
      seconds,
      jobsPerSec: jobs / seconds,
      workerPeakRssMb: peakRssMb(child.pid),
      workerCpuMsPerJob: workerCpu === null || workerCpu0 === null ? null : (workerCpu - workerCpu0) / jobs,
      producerCpuMsPerJob: (producerCpu.user + producerCpu.system) / 1000 / jobs,
      redisCpuMsPerJob: redisMs / jobs,
    };
  } finally {
    await producer.close();
    child.disconnect();
    await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(undefined)));
  }
}
