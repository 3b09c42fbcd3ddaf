/**
 * Lock acquire+release ops/s (LockService: EVALSHA of SET NX PX + INCR fence, then owner-checked
 * EVALSHA GET/DEL) against raw `SET NX PX` + `DEL`. Both on connections set up like the app's lock
 * service (ioredis auto-pipelining, LOCK_CONNECTIONS of them, each key pinned to one by
 * clientFor), with the same number of loops in flight, each on its own key; the two are
 * interleaved in rounds so that a noisy neighbour hits both alike.
 */
import type Redis from 'ioredis';
import { LockService } from '../src/locks/lock.service';
import { clientFor, LOCK_CONNECTIONS, newRedisClient } from '../src/locks/redis-clients';

export interface LockBenchResult {
  concurrency: number;
  /** Connections of each side (the app's LOCK_CONNECTIONS unless BENCH_LOCK_CONNECTIONS says). */
  connections: number;
  lockOpsPerSec: number;
  rawRedisOpsPerSec: number;
  lockRatio: number;
}

const ROUNDS = 3;
const ROUND_MS = 2000;

async function timed(
  concurrency: number,
  ms: number,
  op: (loop: number) => Promise<void>,
): Promise<{ ops: number; seconds: number }> {
  let ops = 0;
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
  return { ops, seconds: Number(process.hrtime.bigint() - t0) / 1e9 };
}

export async function measureLocks(
  redisUrl: string,
  prefix: string,
  concurrency: number,
  connections = LOCK_CONNECTIONS,
): Promise<LockBenchResult> {
  const connect = (): Redis[] => Array.from({ length: connections }, () => newRedisClient(redisUrl));
  const lockRedis = connect();
  const rawRedis = connect();
  const locks = new LockService(lockRedis, `${prefix}:lockbench`, 'bench');
  const lockOp = async (loop: number): Promise<void> => {
    const handle = await locks.acquire(`k${loop}`, 30_000);
    if (!handle) throw new Error(`lock k${loop} unexpectedly held`);
    if (!(await locks.release(handle))) throw new Error(`lock k${loop} release refused`);
  };
  const rawOp = async (loop: number): Promise<void> => {
    const key = `${prefix}:rawbench:k${loop}`;
    const redis = clientFor(rawRedis, key);
    if ((await redis.set(key, 'bench', 'PX', 30_000, 'NX')) !== 'OK') throw new Error(`${key} unexpectedly set`);
    await redis.del(key);
  };
  try {
    // Warm-up: script loading (the first EVALSHA falls back to EVAL), connections, JIT.
    await timed(concurrency, 300, lockOp);
    await timed(concurrency, 300, rawOp);
    const lock = { ops: 0, seconds: 0 };
    const raw = { ops: 0, seconds: 0 };
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
        const t = await timed(concurrency, ROUND_MS, op);
        acc.ops += t.ops;
        acc.seconds += t.seconds;
      }
    }
    const lockOpsPerSec = lock.ops / lock.seconds;
    const rawRedisOpsPerSec = raw.ops / raw.seconds;
    const lockRatio = lockOpsPerSec / rawRedisOpsPerSec;
    return { concurrency, connections, lockOpsPerSec, rawRedisOpsPerSec, lockRatio };
  } finally {
    await Promise.all([...lockRedis, ...rawRedis].map((r) => r.quit()));
  }
}
