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

class LuaScript {
  readonly sha: string;
  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }
}

const SCRIPTS = { acquire: new LuaScript(ACQUIRE), release: new LuaScript(RELEASE), extend: new LuaScript(EXTEND) };

/**
 * Redis locks with owner-checked release/extend and fencing tokens; each operation is ONE round
 * trip (EVALSHA of a script, EVAL once where Redis does not know it yet). Keys are namespaced by
 * the configured prefix.
 */
export class LockService {
  /** Owners are unique, not secret: a per-process nonce and a counter (no crypto call per lock). */
  private readonly ownerBase: string;
  private ownerSeq = 0;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    ownerPrefix: string,
  ) {
    this.ownerBase = `${ownerPrefix}:${randomBytes(6).toString('hex')}:`;
  }

  /**
   * EVALSHA directly rather than ioredis' defineCommand: measurably less client CPU per call on
   * the run path (docs/benchmarks.md). NOSCRIPT (Redis restarted or flushed its script cache):
   * EVAL, which caches the script again.
   */
  private script<T>(s: LuaScript, keys: string[], args: Array<string | number>): Promise<T> {
    return this.redis.evalsha(s.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return this.redis.eval(s.lua, keys.length, ...keys, ...args);
    }) as Promise<T>;
  }

  lockKey(key: string): string {
    return `${this.prefix}:lock:${key}`;
  }

  fenceKey(key: string): string {
    return `${this.prefix}:fence:${key}`;
  }

  newOwner(): string {
    return this.ownerBase + (++this.ownerSeq).toString(36);
  }

  async acquire(key: string, ttlMs: number, owner = this.newOwner()): Promise<LockHandle | null> {
    const token = await this.script<number | null>(SCRIPTS.acquire, [this.lockKey(key), this.fenceKey(key)], [owner, ttlMs]);
    return token === null ? null : { key, owner, token: Number(token), ttlMs };
  }

  async release(handle: Pick<LockHandle, 'key' | 'owner'>): Promise<boolean> {
    return (await this.script<number>(SCRIPTS.release, [this.lockKey(handle.key)], [handle.owner])) === 1;
  }

  async extend(handle: Pick<LockHandle, 'key' | 'owner'>, ttlMs: number): Promise<boolean> {
    return (await this.script<number>(SCRIPTS.extend, [this.lockKey(handle.key)], [handle.owner, ttlMs])) === 1;
  }

  /** Remaining TTL of a lock in ms; -2 when nobody holds it. */
  async remainingMs(key: string): Promise<number> {
    return this.redis.pttl(this.lockKey(key));
  }

  /**
   * Producer guard: a short SET NX so that a storm of identical requests does one piece of work.
   * Returns the owner to pass to release(), or null when someone else is already at it.
   */
  async enterOnce(key: string, ttlMs: number): Promise<string | null> {
    const owner = this.newOwner();
    const ok = await this.redis.set(`${this.prefix}:guard:${key}`, owner, 'PX', ttlMs, 'NX');
    return ok === 'OK' ? owner : null;
  }

  async leave(key: string, owner: string): Promise<void> {
    await this.script(SCRIPTS.release, [`${this.prefix}:guard:${key}`], [owner]);
  }
}
