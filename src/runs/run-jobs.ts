import type { Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { runJobId } from '../queues/job-ids';
import type { RunJobData } from '../queues/queue-names';

/**
 * Adds the jobs of QUEUED runs with ONE Bull addBulk. Rejects when the addBulk does (Redis away):
 * the runs are QUEUED in Postgres, which is the promise, and the reconciler enqueues them again.
 *
 * Bull's addBulk is one MULTI and does not read the answer of each add in it: an add refused there
 * comes back without an id and no error, its job never written. NOSCRIPT does that to every add of
 * the batch when Redis lost its script cache while this connection stayed open (SCRIPT FLUSH, a
 * failover behind a proxy): ioredis sends a script in a MULTI only the first time on a connection.
 * Those jobs are added one by one: a single add answers NOSCRIPT with the script itself, and fails
 * loudly otherwise.
 */
export async function addRunJobs(queue: Queue<RunJobData>, jobs: RunJobData[], logger: Logger): Promise<void> {
  if (jobs.length === 0) return;
  const opts = (data: RunJobData) => ({ jobId: runJobId(data.runId, data.generation) });
  const added = await queue.addBulk(jobs.map((data) => ({ data, opts: opts(data) })));
  const missed = jobs.filter((_, i) => !added[i]?.id);
  if (missed.length === 0) return;
  logger.warn({ msg: 'bulk enqueue refused some adds; adding them one by one', runIds: missed.map((j) => j.runId) });
  await Promise.all(missed.map((data) => queue.add(data, opts(data))));
}
