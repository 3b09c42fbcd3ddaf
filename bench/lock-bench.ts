/**
 * Lock acquire+release ops/s (LockService: EVALSHA of SET NX PX + INCR fence, then owner-checked
 * EVALSHA GET/DEL), on a client configured like the app's (LOCK_REDIS_OPTIONS: no auto-pipelining),
 * against raw `SET NX PX` + `DEL` on three clients: such a client, an auto-pipelined one, and such
 * a client with the lock's own TurnCork on each command (so that what the lock is held against has
 * every trick the lock has, and the ratio is the cost of the scripts and the lock's bookkeeping);
 * held against the fastest; the same number of loops in flight, each on its own key; the four are
 * rotated in rounds so that a noisy neighbour hits all alike.
 */
import Redis from 'ioredis';
import { TurnCork } from '../src/common/turn-cork';
import { LOCK_REDIS_OPTIONS, LockService } from '../src/locks/lock.service';
import { serviceCpu } from './support';

export interface LockBenchResult {
  concurrency: number;
  lockOpsPerSec: number;
  /** The fastest of the clients below: the figure the lock is held against. */
  rawRedisOpsPerSec: number;
  rawOpsPerSecByClient: RawClients<number>;
  lockRatio: number;
  /**
   * CPU µs per acquire+release pair (per SET NX + DEL pair on the fastest raw client): this process (the client),
   * and the Redis server (all of it: another user of the same Redis counts too).
   */
  clientUsPerPair: { lock: number; raw: number };
  redisUsPerPair: { lock: number; raw: number };
}

type RawClients<T> = { plain: T; autoPipelined: T; corked: T };

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
  const lockRedis = new Redis(redisUrl, LOCK_REDIS_OPTIONS);
  // Raw commands on a client like the lock's, on an auto-pipelined one, and on one corked per turn
  // like the lock's: whichever is fastest on this machine and at this concurrency is the figure
  // the lock is held against.
  const rawClients: RawClients<Redis> = {
    plain: new Redis(redisUrl, LOCK_REDIS_OPTIONS),
    autoPipelined: new Redis(redisUrl, { ...LOCK_REDIS_OPTIONS, enableAutoPipelining: true }),
    corked: new Redis(redisUrl, LOCK_REDIS_OPTIONS),
  };
  const rawCork = new TurnCork(rawClients.corked);
  const locks = new LockService(lockRedis, `${prefix}:lockbench`, 'bench');
  const lockOp = async (loop: number): Promise<void> => {
    const handle = await locks.acquire(`k${loop}`, 30_000);
    if (!handle) throw new Error(`lock k${loop} unexpectedly held`);
    if (!(await locks.release(handle))) throw new Error(`lock k${loop} release refused`);
  };
  const rawOp =
    (redis: Redis, cork?: TurnCork) =>
    async (loop: number): Promise<void> => {
      const key = `${prefix}:rawbench:k${loop}`;
      cork?.hold();
      if ((await redis.set(key, 'bench', 'PX', 30_000, 'NX')) !== 'OK') throw new Error(`${key} unexpectedly set`);
      cork?.hold();
      await redis.del(key);
    };
  const sides: Array<{ tally: Tally; op: (loop: number) => Promise<void> }> = [
    { tally: emptyTally(), op: lockOp },
    { tally: emptyTally(), op: rawOp(rawClients.plain) },
    { tally: emptyTally(), op: rawOp(rawClients.autoPipelined) },
    { tally: emptyTally(), op: rawOp(rawClients.corked, rawCork) },
  ];
  try {
    // Warm-up: script loading (the first EVALSHA falls back to EVAL), connections, JIT.
    for (const side of sides) await timed(redisUrl, concurrency, 300, side.op);
    // Rotated per round, so that each side goes first once and a noisy neighbour hits all alike.
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < sides.length; i++) {
        const side = sides[(r + i) % sides.length];
        const t = await timed(redisUrl, concurrency, ROUND_MS, side.op);
        side.tally.ops += t.ops;
        side.tally.seconds += t.seconds;
        side.tally.clientUs += t.clientUs;
        side.tally.redisUs += t.redisUs;
      }
    }
    const [lock, plain, autoPipelined, corked] = sides.map((side) => side.tally);
    const perSec = (t: Tally) => t.ops / t.seconds;
    const raw = [plain, autoPipelined, corked].reduce((a, b) => (perSec(b) > perSec(a) ? b : a));
    return {
      concurrency,
      lockOpsPerSec: perSec(lock),
      rawRedisOpsPerSec: perSec(raw),
      rawOpsPerSecByClient: {
        plain: perSec(plain),
        autoPipelined: perSec(autoPipelined),
        corked: perSec(corked),
      },
      lockRatio: perSec(lock) / perSec(raw),
      clientUsPerPair: { lock: lock.clientUs / lock.ops, raw: raw.clientUs / raw.ops },
      redisUsPerPair: { lock: lock.redisUs / lock.ops, raw: raw.redisUs / raw.ops },
    };
  } finally {
    await Promise.all([lockRedis, ...Object.values(rawClients)].map((client) => client.quit()));
  }
}

function emptyTally(): Tally {
  return { ops: 0, seconds: 0, clientUs: 0, redisUs: 0 };
}
