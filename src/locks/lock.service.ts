import { createHash, randomBytes } from 'node:crypto';
import Redis from 'ioredis';

export interface LockHandle {
  key: string;
  owner: string;
  /** Monotonic per key (an INCR in the same script as the SET NX). */
  token: number;
  ttlMs: number;
}

// KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] owner, ARGV[2] ttl ms.
const ACQUIRE = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`;
// Owner-checked: a holder whose lock expired and was taken over can neither free nor extend it.
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;
const EXTEND = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;
// Like EXTEND, but a key that is gone (Redis restarted or flushed, never taken by another owner)
// is set again for the same owner: 1 extended, 2 taken again, 0 held by another owner.
const EXTEND_OR_RETAKE = `
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0`;

export type ExtendResult = 'extended' | 'retaken' | 'lost';

class Script {
  readonly sha: string;
  constructor(
    readonly lua: string,
    readonly keys: number,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }
}
const SCRIPTS = {
  acquire: new Script(ACQUIRE, 2),
  release: new Script(RELEASE, 1),
  extend: new Script(EXTEND, 1),
  extendOrRetake: new Script(EXTEND_OR_RETAKE, 1),
};

/**
 * Redis locks with owner-checked release/extend and fencing tokens; each operation is ONE round
 * trip (EVALSHA; EVAL once after a Redis restart lost the script cache). Keys are namespaced by
 * the configured prefix.
 */
export class LockService {
  /** Owners are unique, not secret: a random per-process nonce plus a counter (no crypto per lock). */
  private readonly nonce = randomBytes(6).toString('hex');
  private seq = 0;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly ownerPrefix: string,
  ) {}

  /**
   * Runs a script by its hash; on NOSCRIPT (a restarted or flushed Redis) sends the body, which
   * also caches it again. ioredis' defineCommand does the same but costs more per call.
   */
  private async run<T>(script: Script, args: Array<string | number>): Promise<T> {
    try {
      return (await this.redis.evalsha(script.sha, script.keys, ...args)) as T;
    } catch (err) {
      if (!String((err as Error)?.message).startsWith('NOSCRIPT')) throw err;
      return (await this.redis.eval(script.lua, script.keys, ...args)) as T;
    }
  }

  lockKey(key: string): string {
    return `${this.prefix}:lock:${key}`;
  }

  fenceKey(key: string): string {
    return `${this.prefix}:fence:${key}`;
  }

  newOwner(): string {
    return `${this.ownerPrefix}:${this.nonce}:${(this.seq++).toString(36)}`;
  }

  async acquire(key: string, ttlMs: number, owner = this.newOwner()): Promise<LockHandle | null> {
    const token = await this.run<number | null>(SCRIPTS.acquire, [this.lockKey(key), this.fenceKey(key), owner, ttlMs]);
    return token === null ? null : { key, owner, token: Number(token), ttlMs };
  }

  async release(handle: Pick<LockHandle, 'key' | 'owner'>): Promise<boolean> {
    return (await this.run<number>(SCRIPTS.release, [this.lockKey(handle.key), handle.owner])) === 1;
  }

  async extend(handle: Pick<LockHandle, 'key' | 'owner'>, ttlMs: number): Promise<boolean> {
    return (await this.run<number>(SCRIPTS.extend, [this.lockKey(handle.key), handle.owner, ttlMs])) === 1;
  }

  /**
   * extend() for a holder whose work is fenced elsewhere (a lease in Postgres): a key that vanished
   * is set again instead of lost. Only safe where that other fence decides who may write.
   */
  async extendOrRetake(handle: Pick<LockHandle, 'key' | 'owner'>, ttlMs: number): Promise<ExtendResult> {
    const r = await this.run<number>(SCRIPTS.extendOrRetake, [this.lockKey(handle.key), handle.owner, ttlMs]);
    return r === 1 ? 'extended' : r === 2 ? 'retaken' : 'lost';
  }

  /** Remaining TTL of a lock in ms; -2 when nobody holds it. */
  async remainingMs(key: string): Promise<number> {
    return this.redis.pttl(this.lockKey(key));
  }

  /**
   * Producer guard: a short SET NX so that a storm of identical requests does one piece of work.
   * Returns the owner to pass to leaveGuard(), or null when someone else is already at it.
   */
  async enterGuard(key: string, ttlMs: number): Promise<string | null> {
    const owner = this.newOwner();
    const ok = await this.redis.set(`${this.prefix}:guard:${key}`, owner, 'PX', ttlMs, 'NX');
    return ok === 'OK' ? owner : null;
  }

  /**
   * enterGuard for many keys in one round trip (a pipeline): the owner per key, in order, null
   * where someone else is already at it. A guard taken before a Redis error lapses with its TTL.
   */
  async enterGuards(keys: readonly string[], ttlMs: number): Promise<Array<string | null>> {
    const owners = keys.map(() => this.newOwner());
    const pipeline = this.redis.pipeline();
    keys.forEach((key, i) => pipeline.set(`${this.prefix}:guard:${key}`, owners[i], 'PX', ttlMs, 'NX'));
    const replies = (await pipeline.exec()) ?? [];
    return keys.map((_, i) => {
      const [err, reply] = replies[i] ?? [new Error('no reply from Redis'), null];
      if (err) throw err;
      return reply === 'OK' ? owners[i] : null;
    });
  }

  /** Leaves the guards enterGuards() took (null owners are skipped). */
  async leaveGuards(keys: readonly string[], owners: ReadonlyArray<string | null>): Promise<void> {
    await Promise.all(
      keys.map((key, i) => {
        const owner = owners[i];
        return owner ? this.leaveGuard(key, owner) : undefined;
      }),
    );
  }

  async leaveGuard(key: string, owner: string): Promise<void> {
    await this.run<number>(SCRIPTS.release, [`${this.prefix}:guard:${key}`, owner]);
  }
}
