/**
 * Exponential backoff with full jitter (AWS architecture blog): the n-th retry waits a uniformly
 * random time in [0, min(cap, base * 2^(n-1))]. The jitter spreads a thundering herd of retries
 * (every job failing at once when Postgres goes away); the cap bounds the wait once it is back.
 */
export function backoffCeilingMs(attempt: number, baseMs: number, capMs: number): number {
  const exp = baseMs * Math.pow(2, Math.max(0, attempt - 1));
  return Math.min(capMs, exp);
}

export function fullJitterDelayMs(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
): number {
  return Math.floor(random() * (backoffCeilingMs(attempt, baseMs, capMs) + 1));
}

export interface RetryOptions {
  /** Which errors are worth another try; any other is thrown at once. */
  retryable: (err: unknown) => boolean;
  firstDelayMs: number;
  maxDelayMs: number;
  /** After this moment (epoch ms) the next failure is thrown. */
  deadline: number;
  /** Called before each wait, e.g. to log it. */
  onRetry?: (err: unknown, delayMs: number) => void;
}

/**
 * Calls `attempt` until it succeeds, doubling the wait after each retryable failure up to
 * `maxDelayMs`. `attempt` learns whether an earlier try failed (its commit may have landed anyway).
 */
export async function retryWithBackoff<T>(attempt: (retried: boolean) => Promise<T>, o: RetryOptions): Promise<T> {
  let retried = false;
  for (let delay = o.firstDelayMs; ; delay = Math.min(delay * 2, o.maxDelayMs)) {
    try {
      return await attempt(retried);
    } catch (err) {
      if (!o.retryable(err) || Date.now() > o.deadline) throw err;
      retried = true;
      o.onRetry?.(err, delay);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
