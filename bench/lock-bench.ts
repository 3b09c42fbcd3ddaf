/**
 * Lock acquire+release ops/s (LockService: EVALSHA of SET NX PX + INCR fence, then owner-checked
 * EVALSHA GET/DEL) against raw `SET NX PX` + `DEL`. Both on a client configured like the app's
 * (ioredis auto-pipelining), with the same number of loops in flight, each on its own key; the two
 * are interleaved in rounds so that a noisy neighbour hits both alike.
 */
import Redis from 'ioredis';
import { LockService } from '../src/locks/lock.service';
import { serviceCpu } from './support';

export interface LockBenchResult {
  concurrency: number;
  lockOpsPerSec: number;
  rawRedisOpsPerSec: number;
  lockRatio: number;
  /**
   * CPU µs per acquire+release pair (per SET NX + DEL pair for raw): this process (the client),
   * and the Redis server (all of it: another user of the same Redis counts too).
   */
  clientUsPerPair: { lock: number; raw: number };
  redisUsPerPair: { lock: number; raw: number };
}

const ROUNDS = 3;
const ROUND_MS = 2000;

interface Tally {
  ops: number;
  seconds: number;
  clientUs: number;
  redisUs: number;
}

async function timed(
  redisUrl: string,
  concurrency: number,
  ms: number,
  op: (loop: number) => Promise<void>,
): Promise<Tally> {
  let ops = 0;
  const redisCpu = await serviceCpu(null, redisUrl);
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const stopAt = Date.now() + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (Date.now() < stopAt) {
        await op(loop);
        ops++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const { redisMs } = await redisCpu();
  return { ops, seconds, clientUs: cpu.user + cpu.system, redisUs: redisMs * 1000 };
}

export async function measureLocks(redisUrl: string, prefix: string, concurrency: number): Promise<LockBenchResult> {
  // The same options as the app's lock client (src/locks/locks.module.ts).
  const options = { maxRetriesPerRequest: 3, enableAutoPipelining: true };
  const lockRedis = new Redis(redisUrl, options);
  const rawRedis = new Redis(redisUrl, options);
  const locks = new LockService(lockRedis, `${prefix}:lockbench`, 'bench');
  const lockOp = async (loop: number): Promise<void> => {
    const handle = await locks.acquire(`k${loop}`, 30_000);
    if (!handle) throw new Error(`lock k${loop} unexpectedly held`);
    if (!(await locks.release(handle))) throw new Error(`lock k${loop} release refused`);
  };
  const rawOp = async (loop: number): Promise<void> => {
    const key = `${prefix}:rawbench:k${loop}`;
    if ((await rawRedis.set(key, 'bench', 'PX', 30_000, 'NX')) !== 'OK') throw new Error(`${key} unexpectedly set`);
    await rawRedis.del(key);
  };
  try {
    // Warm-up: script loading (the first EVALSHA falls back to EVAL), connections, JIT.
    await timed(redisUrl, concurrency, 300, lockOp);
    await timed(redisUrl, concurrency, 300, rawOp);
    const lock: Tally = { ops: 0, seconds: 0, clientUs: 0, redisUs: 0 };
    const raw: Tally = { ops: 0, seconds: 0, clientUs: 0, redisUs: 0 };
    for (let r = 0; r < ROUNDS; r++) {
      for (const [acc, op] of r % 2
        ? ([
            [raw, rawOp],
            [lock, lockOp],
          ] as const)
        : ([
            [lock, lockOp],
            [raw, rawOp],
          ] as const)) {
        const t = await timed(redisUrl, concurrency, ROUND_MS, op);
        acc.ops += t.ops;
        acc.seconds += t.seconds;
        acc.clientUs += t.clientUs;
        acc.redisUs += t.redisUs;
      }
    }
    const lockOpsPerSec = lock.ops / lock.seconds;
    const rawRedisOpsPerSec = raw.ops / raw.seconds;
    return {
      concurrency,
      lockOpsPerSec,
      rawRedisOpsPerSec,
      lockRatio: lockOpsPerSec / rawRedisOpsPerSec,
      clientUsPerPair: { lock: lock.clientUs / lock.ops, raw: raw.clientUs / raw.ops },
      redisUsPerPair: { lock: lock.redisUs / lock.ops, raw: raw.redisUs / raw.ops },
    };
  } finally {
    await Promise.all([lockRedis.quit(), rawRedis.quit()]);
  }
}
