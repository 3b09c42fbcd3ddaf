/**
 * Exponential backoff with full jitter (AWS architecture blog): the n-th retry waits a uniformly
 * random time in [0, min(cap, base * 2^(n-1))]. The jitter spreads a thundering herd of retries
 * (every job failing at once when Postgres goes away); the cap bounds the wait once it is back.
 */
export function backoffCeilingMs(attempt: number, baseMs: number, capMs: number): number {
  const exp = baseMs * Math.pow(2, Math.max(0, attempt - 1));
  return Math.min(capMs, exp);
}

export function fullJitterDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * (backoffCeilingMs(attempt, baseMs, capMs) + 1));
}
