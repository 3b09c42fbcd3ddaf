import { randomBytes } from 'node:crypto';
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

type LockRedis = Redis & {
  onceflowAcquire(lock: string, fence: string, owner: string, ttl: number): Promise<number | null>;
  onceflowRelease(lock: string, owner: string): Promise<number>;
  onceflowExtend(lock: string, owner: string, ttl: number): Promise<number>;
};

/**
 * Redis locks with owner-checked release/extend and fencing tokens; each operation is ONE round
 * trip (EVALSHA of a script loaded once). Keys are namespaced by the configured prefix.
 */
export class LockService {
  private readonly redis: LockRedis;

  constructor(
    redis: Redis,
    private readonly prefix: string,
    private readonly ownerPrefix: string,
  ) {
    redis.defineCommand('onceflowAcquire', { numberOfKeys: 2, lua: ACQUIRE });
    redis.defineCommand('onceflowRelease', { numberOfKeys: 1, lua: RELEASE });
    redis.defineCommand('onceflowExtend', { numberOfKeys: 1, lua: EXTEND });
    this.redis = redis as LockRedis;
  }

  lockKey(key: string): string {
    return `${this.prefix}:lock:${key}`;
  }

  fenceKey(key: string): string {
    return `${this.prefix}:fence:${key}`;
  }

  newOwner(): string {
    return `${this.ownerPrefix}:${randomBytes(8).toString('hex')}`;
  }

  async acquire(key: string, ttlMs: number, owner = this.newOwner()): Promise<LockHandle | null> {
    const token = await this.redis.onceflowAcquire(this.lockKey(key), this.fenceKey(key), owner, ttlMs);
    return token === null ? null : { key, owner, token: Number(token), ttlMs };
  }

  async release(handle: Pick<LockHandle, 'key' | 'owner'>): Promise<boolean> {
    return (await this.redis.onceflowRelease(this.lockKey(handle.key), handle.owner)) === 1;
  }

  async extend(handle: Pick<LockHandle, 'key' | 'owner'>, ttlMs: number): Promise<boolean> {
    return (await this.redis.onceflowExtend(this.lockKey(handle.key), handle.owner, ttlMs)) === 1;
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
    await this.redis.onceflowRelease(`${this.prefix}:guard:${key}`, owner);
  }
}
