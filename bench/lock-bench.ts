/**
 * Lock acquire+release ops/s (LockService: EVALSHA of SET NX PX + INCR fence, then owner-checked
 * EVALSHA GET/DEL) against raw `SET NX PX` + `DEL`. Both on a client configured like the app's
 * (ioredis auto-pipelining), with the same number of loops in flight, each on its own key; the two
 * are interleaved in rounds so that a noisy neighbour hits both alike.
 */
import Redis from 'ioredis';
import { LockService } from '../src/locks/lock.service';

export interface LockBenchResult {
  concurrency: number;
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
    return { concurrency, lockOpsPerSec, rawRedisOpsPerSec, lockRatio: lockOpsPerSec / rawRedisOpsPerSec };
  } finally {
    await Promise.all([lockRedis.quit(), rawRedis.quit()]);
  }
}
