/**
 * Exponential backoff with full jitter (AWS architecture blog): the n-th retry waits a uniformly
 * random time in [0, min(cap, base * 2^(n-1))]. Jitter spreads a thundering herd of retries.
 */
export function retryCeilingMs(attempt: number, baseMs: number, capMs: number): number {
  const exp = baseMs * Math.pow(2, Math.max(0, attempt - 1));
  return Math.min(capMs, exp);
}

export function retryDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  return Math.floor(random() * (retryCeilingMs(attempt, baseMs, capMs) + 1));
}
