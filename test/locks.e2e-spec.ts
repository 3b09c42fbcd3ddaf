import Redis from 'ioredis';
import { Heartbeat, LockLostError } from '../src/locks/heartbeat';
import { LockService } from '../src/locks/lock.service';
import { waitFor } from './support/app';
import { testRedisUrl, uniquePrefix } from './support/env';

/** LockService and Heartbeat against the real Redis. */
describe('LockService (real Redis)', () => {
  let redis: Redis;
  let locks: LockService;
  let other: LockService;

  beforeAll(() => {
    redis = new Redis(testRedisUrl());
    const prefix = uniquePrefix('locks');
    locks = new LockService(redis, prefix, 'a');
    other = new LockService(new Redis(testRedisUrl()), prefix, 'b');
  });
  afterAll(async () => {
    await redis.quit();
    await (other as unknown as { redis: Redis }).redis.quit();
  });

  it('gives the lock to exactly one of 50 concurrent acquirers', async () => {
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? locks : other).acquire('race', 5000)));
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('hands out strictly increasing fencing tokens per key', async () => {
    const tokens: number[] = [];
    for (let i = 0; i < 5; i++) {
      const h = await locks.acquire('tokens', 5000);
      tokens.push(h!.token);
      await locks.release(h!);
    }
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(5);
  });

  it('lets only the owner release or extend', async () => {
    const mine = await locks.acquire('owner', 5000);
    expect(mine).not.toBeNull();
    expect(await other.release({ key: 'owner', owner: 'b:someone-else' })).toBe(false);
    expect(await other.extend({ key: 'owner', owner: 'b:someone-else' }, 5000)).toBe(false);
    expect(await other.acquire('owner', 5000)).toBeNull();
    expect(await locks.extend(mine!, 5000)).toBe(true);
    expect(await locks.release(mine!)).toBe(true);
    expect(await other.acquire('owner', 5000)).not.toBeNull();
  });

  it('an expired holder cannot release the new holder’s lock', async () => {
    const stale = await locks.acquire('expiry', 100);
    await waitFor(async () => (await locks.remainingMs('expiry')) < 0, 2000, 'lock expiry');
    const fresh = await other.acquire('expiry', 5000);
    expect(fresh!.token).toBeGreaterThan(stale!.token);
    expect(await locks.release(stale!)).toBe(false);
    expect(await locks.extend(stale!, 5000)).toBe(false);
    expect(await locks.remainingMs('expiry')).toBeGreaterThan(0);
  });

  it('producer guard lets one of many concurrent entrants through', async () => {
    const owners = await Promise.all(Array.from({ length: 20 }, () => locks.enterOnce('guard', 2000)));
    expect(owners.filter(Boolean)).toHaveLength(1);
  });
});

describe('Heartbeat (real Redis)', () => {
  let redis: Redis;
  let locks: LockService;
  beforeAll(() => {
    redis = new Redis(testRedisUrl());
    locks = new LockService(redis, uniquePrefix('hb'), 'hb');
  });
  afterAll(() => redis.quit());

  it('keeps a lock alive well past its TTL', async () => {
    const h = (await locks.acquire('alive', 300))!;
    const hb = new Heartbeat(() => locks.extend(h, h.ttlMs), h.ttlMs, h.key).start();
    await new Promise((r) => setTimeout(r, 1000));
    expect(hb.signal.aborted).toBe(false);
    expect(await locks.remainingMs('alive')).toBeGreaterThan(0);
    hb.stop();
    await locks.release(h);
  });

  it('aborts the moment an extend fails (lock taken over)', async () => {
    const h = (await locks.acquire('stolen', 300))!;
    const hb = new Heartbeat(() => locks.extend(h, h.ttlMs), h.ttlMs, h.key).start();
    await redis.set(locks.lockKey('stolen'), 'thief', 'PX', 5000);
    await waitFor(() => hb.signal.aborted, 1000, 'abort after a failed extend');
    expect((hb.signal.reason as LockLostError).reason).toBe('extend_failed');
  });

  it('aborts when a beat comes late (the process was frozen)', async () => {
    const h = (await locks.acquire('late', 300))!;
    const hb = new Heartbeat(() => locks.extend(h, h.ttlMs), h.ttlMs, h.key).start();
    // Block the event loop past the lock's TTL, as a GC pause or SIGSTOP would.
    const until = Date.now() + 450;
    while (Date.now() < until) {
      /* frozen */
    }
    await waitFor(() => hb.signal.aborted, 1000, 'abort after a late beat');
    expect((hb.signal.reason as LockLostError).reason).toBe('extend_late');
  });

  it('aborts when a beat check says the work is no longer ours', async () => {
    const h = (await locks.acquire('check', 300))!;
    const hb = new Heartbeat(() => locks.extend(h, h.ttlMs), h.ttlMs, h.key, { onBeat: async () => false }).start();
    await waitFor(() => hb.signal.aborted, 1000, 'abort after a failed check');
    expect((hb.signal.reason as LockLostError).reason).toBe('check_failed');
  });
});
