/**
 * The baseline's consumer, a child process of bench.ts: a Bull worker with onceflow's own queue
 * settings and concurrency but a handler that does nothing — no lock, no database. It reports its
 * completed-job count to the parent over IPC.
 *
 * BARE_MODE=fork: the handler forks `sh -c true` and waits for its exit, the baseline of the
 * full-path phase, whose runs fork the same command. BARE_MODE=lock: the handler takes the job's
 * run lock (onceflow's LockService on a client configured like the app's: SET NX PX + fencing
 * INCR, then the owner-checked release) — Bull plus the first of onceflow's guarantees, the rung
 * between bare Bull and a guarded run.
 *
 * Environment (set by bench.ts): REDIS_URL, REDIS_PREFIX, BARE_QUEUE, BARE_CONCURRENCY, BARE_MODE.
 */
import Bull from 'bull';
import Redis from 'ioredis';
import { spawn } from 'node:child_process';
import { loadConfig } from '../src/config/app-config';
import { LOCK_REDIS_OPTIONS, LockService } from '../src/locks/lock.service';
import { queueOptions } from '../src/queues/queue-settings';
import type { RunJobData } from '../src/queues/queue-names';

const config = loadConfig({ ...process.env, API_KEYS: 'bench-api-key-0123456789', NODE_ENV: 'production' });
const queue = new Bull<RunJobData>(process.env.BARE_QUEUE ?? 'bare', queueOptions(config));
let completed = 0;
let lastAt = 0;
queue.on('completed', () => {
  completed++;
  lastAt = Date.now();
});
const forkTrue = () =>
  new Promise<void>((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', 'true'], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve());
  });
const lockClient = process.env.BARE_MODE === 'lock' ? new Redis(config.redis.url, LOCK_REDIS_OPTIONS) : null;
const locks = lockClient && new LockService(lockClient, `${config.redis.prefix}:barelock`, 'bare');
const runLocked = async (job: Bull.Job<RunJobData>) => {
  const handle = await locks!.acquire(`run:${job.data.runId}`, config.runs.lockTtlMs);
  if (!handle) throw new Error(`run lock of ${job.data.runId} unexpectedly held`);
  if (!(await locks!.release(handle))) throw new Error(`run lock of ${job.data.runId} lost`);
};
// A no-op handler: what Bull itself costs per job (or Bull plus one fork, or plus the run lock).
const handler =
  process.env.BARE_MODE === 'fork' ? forkTrue : process.env.BARE_MODE === 'lock' ? runLocked : async () => undefined;
void queue.process(config.worker.concurrency, handler);
// The parent may be gone between two reports (it disconnects when it has its figure): a send then
// fails with EPIPE, which without a callback is an unhandled 'error' event.
const send = (msg: object) => {
  if (process.connected) process.send?.(msg, undefined, {}, () => undefined);
};
const report = setInterval(() => send({ completed, lastAt }), 20);
queue
  .isReady()
  .then(() => send({ ready: true }))
  .catch((err: unknown) => {
    process.stderr.write(`bare worker: ${String(err)}\n`);
    process.exit(1);
  });
process.on('disconnect', () => {
  clearInterval(report);
  void Promise.all([queue.close(), lockClient?.quit()]).finally(() => process.exit(0));
});
