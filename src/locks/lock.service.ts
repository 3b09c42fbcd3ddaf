import { createHash, randomBytes } from 'node:crypto';
import Redis, { RedisOptions } from 'ioredis';
import { TurnCork } from '../common/turn-cork';

/**
 * The lock client's options, for the app and the bench alike. No auto-pipelining: ioredis keeps
 * one auto-pipelined batch in flight per connection and holds the next until every reply of the
 * first is in, so the client's work and Redis' take turns and each lock script's time in Redis
 * counts in full. LockService batches its own writes instead (TurnCork: the operations of a turn
 * of the event loop in writes of up to 16, none held back for replies): 64 acquire+release loops
 * ~30,000 → ~45,000 pairs/s at half the CPU per pair, then ~145,000 with the writes of 16
 * (docs/benchmarks.md, "Locks").
 */
export const LOCK_REDIS_OPTIONS: RedisOptions = { maxRetriesPerRequest: 3, enableAutoPipelining: false };

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

// Producer guards, many per call: KEYS the guards, ARGV[1] the ttl, ARGV[1 + i] the owner for KEYS[i].
// SET NX of each; answers 1 where it was taken for that owner, 0 where someone else holds it.
const ENTER_GUARDS = `
local taken = {}
for i, key in ipairs(KEYS) do
  taken[i] = redis.call('SET', key, ARGV[i + 1], 'NX', 'PX', ARGV[1]) and 1 or 0
end
return taken`;
// Owner-checked release of many guards: KEYS the guards, ARGV[i] the owner for KEYS[i].
const LEAVE_GUARDS = `
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then redis.call('DEL', key) end
end
return 0`;

const isOne = (reply: number): boolean => reply === 1;

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
// Their key counts vary per call: run() is given it.
const guardScripts = { enter: new Script(ENTER_GUARDS, 0), leave: new Script(LEAVE_GUARDS, 0) };

/**
 * Redis locks with owner-checked release/extend and fencing tokens; each operation is ONE round
 * trip (EVALSHA; EVAL once after a Redis restart lost the script cache). Keys are namespaced by
 * the configured prefix.
 */
export class LockService {
  /** Owners are unique, not secret: a random per-process nonce plus a counter (no crypto per lock). */
  private readonly nonce = randomBytes(6).toString('hex');
  private seq = 0;
  /**
   * The lock operations asked for in one turn of the event loop leave in writes of up to 16, without
   * waiting for the replies of the previous write (auto-pipelining would wait, see
   * LOCK_REDIS_OPTIONS): Redis reads each in one read, and the client and Redis work side by side.
   */
  private readonly cork: TurnCork;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly ownerPrefix: string,
  ) {
    this.cork = new TurnCork(redis);
  }

  /**
   * Runs a script by its hash, its reply mapped by `map`; on NOSCRIPT (a restarted or flushed
   * Redis) sends the body, which also caches it again. One `then` per call, no async frames and
   * no defineCommand: each costs the client more per lock (docs/benchmarks.md, "Locks").
   */
  private run<R, T = R>(
    script: Script,
    args: Array<string | number>,
    map: (reply: R) => T,
    keys = script.keys,
  ): Promise<T> {
    this.cork.hold();
    return (this.redis.evalsha(script.sha, keys, ...args) as Promise<R>).then(map, (err: unknown) => {
      if (!String((err as Error)?.message).startsWith('NOSCRIPT')) throw err;
      return (this.redis.eval(script.lua, keys, ...args) as Promise<R>).then(map);
    });
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

  acquire(key: string, ttlMs: number, owner = this.newOwner()): Promise<LockHandle | null> {
    return this.run(SCRIPTS.acquire, [this.lockKey(key), this.fenceKey(key), owner, ttlMs], (token: number | null) =>
      token === null ? null : { key, owner, token: Number(token), ttlMs },
    );
  }

  release(handle: Pick<LockHandle, 'key' | 'owner'>): Promise<boolean> {
    return this.run(SCRIPTS.release, [this.lockKey(handle.key), handle.owner], isOne);
  }

  extend(handle: Pick<LockHandle, 'key' | 'owner'>, ttlMs: number): Promise<boolean> {
    return this.run(SCRIPTS.extend, [this.lockKey(handle.key), handle.owner, ttlMs], isOne);
  }

  /**
   * extend() for a holder whose work is fenced elsewhere (a lease in Postgres): a key that vanished
   * is set again instead of lost. Only safe where that other fence decides who may write.
   */
  extendOrRetake(handle: Pick<LockHandle, 'key' | 'owner'>, ttlMs: number): Promise<ExtendResult> {
    return this.run(SCRIPTS.extendOrRetake, [this.lockKey(handle.key), handle.owner, ttlMs], (r: number) =>
      r === 1 ? 'extended' : r === 2 ? 'retaken' : 'lost',
    );
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
    const ok = await this.redis.set(this.guardKey(key), owner, 'PX', ttlMs, 'NX');
    return ok === 'OK' ? owner : null;
  }

  /**
   * enterGuard for many keys in ONE command (a script: one call instead of a SET per key): the
   * owner per key, in order, null where someone else is already at it. Guards taken before a
   * Redis error lapse with their TTL.
   */
  async enterGuards(keys: readonly string[], ttlMs: number): Promise<Array<string | null>> {
    if (keys.length === 0) return [];
    const owners = keys.map(() => this.newOwner());
    return this.run(
      guardScripts.enter,
      [...keys.map((key) => this.guardKey(key)), ttlMs, ...owners],
      (taken: number[]) => keys.map((_, i) => (taken[i] === 1 ? owners[i] : null)),
      keys.length,
    );
  }

  /** Leaves the guards enterGuards() took (null owners are skipped), in one command. */
  async leaveGuards(keys: readonly string[], owners: ReadonlyArray<string | null>): Promise<void> {
    const held = keys.flatMap((key, i) => (owners[i] ? [{ key: this.guardKey(key), owner: owners[i]! }] : []));
    if (held.length === 0) return;
    const args = [...held.map((h) => h.key), ...held.map((h) => h.owner)];
    await this.run(guardScripts.leave, args, () => undefined, held.length);
  }

  private guardKey(key: string): string {
    return `${this.prefix}:guard:${key}`;
  }

  async leaveGuard(key: string, owner: string): Promise<void> {
    await this.run(SCRIPTS.release, [this.guardKey(key), owner], () => undefined);
  }
}
