import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

/** The repository root, found from wherever this file runs (source under ts, or dist/scripts/...). */
export function repoRoot(from = __dirname): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'test/support/fake-orchestrator.sh'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the onceflow repository above ${from}`);
    dir = up;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls until `check` is true; on timeout the error says what was awaited. Every wait is bounded. */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
  everyMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${String(lastErr)})` : ''}`,
      );
    await sleep(everyMs);
  }
}

/** A free TCP port on 127.0.0.1: `wanted` if it can be bound, else any. */
export async function freePort(wanted = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', (err) => (wanted ? freePort().then(resolve, reject) : reject(err)));
    srv.listen(wanted, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A seeded PRNG (mulberry32): a failing chaos run can be replayed with CHAOS_SEED. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick<T>(rand: () => number, items: T[]): T {
  return items[Math.floor(rand() * items.length)];
}

export function shuffle<T>(rand: () => number, items: T[]): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

/** True for a live process; a zombie (killed, not reaped yet) counts as dead. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** Runs `fn` on at most `limit` items at once. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  });
  await Promise.all(lanes);
  return out;
}
