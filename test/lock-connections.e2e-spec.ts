import Redis from 'ioredis';
import { LockService } from '../src/locks/lock.service';
import { clientFor, LOCK_CONNECTIONS, newRedisClient } from '../src/locks/redis-clients';
import { waitFor } from './support/app';
import { testRedisUrl, uniquePrefix } from './support/env';

/**
 * LockService over several connections (the app's LOCK_CONNECTIONS), against the real Redis:
 * every command about one key goes through one connection, so Redis' order per key is the order
 * the holder issued them in, and the keys are spread over all the connections.
 */
describe('LockService over several connections (real Redis)', () => {
  let pool: Redis[];
  let admin: Redis;
  let monitor: Redis;
  let locks: LockService;
  let prefix: string;
  /** Per lock key: the client addresses its EVALSHA/EVAL commands came from, in order. */
  const sources = new Map<string, string[]>();

  beforeAll(async () => {
    pool = Array.from({ length: LOCK_CONNECTIONS }, () => newRedisClient(testRedisUrl()));
    prefix = uniquePrefix('lock-conns');
    locks = new LockService(pool, prefix, 'c');
    admin = new Redis(testRedisUrl());
    monitor = await admin.monitor();
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      // Commands run inside a script show up too (source "lua"): count the client's own only.
      if (!/^eval(sha)?$/i.test(args[0] ?? '') || !args[3]?.startsWith(`${prefix}:lock:`)) return;
      sources.set(args[3], [...(sources.get(args[3]) ?? []), source]);
    });
    await Promise.all(pool.map((r) => r.ping()));
  });
  afterAll(async () => {
    // A monitoring connection takes no more commands, QUIT included.
    monitor.disconnect();
    await Promise.all([...pool, admin].map((r) => r.quit()));
  });

  it('needs a connection', () => {
    expect(() => new LockService([], prefix, 'c')).toThrow(/needs a Redis client/);
  });

  it('sends acquire, extend, extend-or-retake and release of a key over one connection, and uses every connection', async () => {
    const keys = Array.from({ length: 24 }, (_, i) => `spread-${i}`);
    await Promise.all(
      keys.map(async (key) => {
        const h = await locks.acquire(key, 5000);
        expect(h).not.toBeNull();
        expect(await locks.extend(h!, 5000)).toBe(true);
        expect(await locks.extendOrRetake(h!, 5000)).toBe('extended');
        expect(await locks.release(h!)).toBe(true);
      }),
    );
    const lockKeys = keys.map((k) => locks.lockKey(k));
    await waitFor(() => lockKeys.every((k) => sources.get(k)?.length === 4), 5000, 'MONITOR to show every command');
    for (const k of lockKeys) expect(new Set(sources.get(k))).toHaveProperty('size', 1);
    expect(new Set(lockKeys.map((k) => sources.get(k)![0])).size).toBe(LOCK_CONNECTIONS);
  });

  it('lands an extend-or-retake still in flight before the release that follows it (no retake after release)', async () => {
    for (let i = 0; i < 20; i++) {
      const key = `late-beat-${i}`;
      const h = await locks.acquire(key, 5000);
      // A heartbeat's beat in flight when the holder finishes (Heartbeat.stop() does not wait for
      // it), held in the client's socket: were the release sent over another connection, it would
      // run first and the beat would then take the key again.
      const socket = (clientFor(pool, locks.lockKey(key)) as unknown as { stream: NodeJS.WritableStream }).stream;
      socket.cork();
      const beat = locks.extendOrRetake(h!, 5000);
      const release = locks.release(h!);
      await new Promise((resolve) => setTimeout(resolve, 10));
      socket.uncork();
      expect(await beat).toBe('extended');
      expect(await release).toBe(true);
      expect(await admin.exists(locks.lockKey(key))).toBe(0);
    }
  });

  it('pins a key to the same connection every time, and spreads keys that differ only at the end', () => {
    const conns = [0, 1, 2];
    for (const key of ['run:1', 'run:2', 'a-much-longer-key:with:parts']) {
      expect(clientFor(conns, key)).toBe(clientFor(conns, key));
    }
    const counts = [0, 0, 0];
    for (let i = 0; i < 300; i++) counts[clientFor(conns, `prefix:lock:run:${i}`)]++;
    for (const c of counts) expect(c).toBeGreaterThan(60);
    expect(clientFor(['only'], 'anything')).toBe('only');
  });
});
