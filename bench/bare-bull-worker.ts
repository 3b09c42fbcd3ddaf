/**
 * The baseline's consumer, a child process of bench.ts: a Bull worker with onceflow's own queue
 * settings and concurrency but a handler that does nothing — no lock, no database. It reports its
 * completed-job count to the parent over IPC.
 *
 * With BARE_FORK=1 the handler forks `sh -c true` and waits for its exit: the baseline of the
 * full-path phase, whose runs fork the same command.
 *
 * Environment (set by bench.ts): REDIS_URL, REDIS_PREFIX, BARE_QUEUE, BARE_CONCURRENCY, BARE_FORK.
 */
import Bull from 'bull';
import { spawn } from 'node:child_process';
import { loadConfig } from '../src/config/app-config';
import { queueOptions } from '../src/queues/queue-settings';

const config = loadConfig({ ...process.env, API_KEYS: 'bench-api-key-0123456789', NODE_ENV: 'production' });
const queue = new Bull(process.env.BARE_QUEUE ?? 'bare', queueOptions(config));
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
// A no-op handler: what Bull itself costs per job (or Bull plus one fork).
const handler = process.env.BARE_FORK === '1' ? forkTrue : async () => undefined;
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
  void queue.close().finally(() => process.exit(0));
});
