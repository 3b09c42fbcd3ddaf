/** No single notification retry waits longer than this (Retry-After included): past it we would rather try. */
export const NOTIFY_RETRY_MAX_DELAY_MS = 15 * 60_000;

/**
 * Delay before the attempt after `attempt` failed: exponential from `baseMs` with "equal jitter"
 * (half fixed, half random), so a retry never fires right on the heels of a failure while a burst
 * of failures (a Slack outage) still spreads out. A 429's Retry-After wins over the formula.
 */
export function notificationRetryDelayMs(
  attempt: number,
  baseMs: number,
  retryAfterMs?: number,
  random: () => number = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.min(NOTIFY_RETRY_MAX_DELAY_MS, Math.max(0, Math.ceil(retryAfterMs)));
  const ceiling = Math.min(NOTIFY_RETRY_MAX_DELAY_MS, baseMs * Math.pow(2, Math.max(0, attempt - 1)));
  return Math.ceil(ceiling / 2 + (random() * ceiling) / 2);
}

/** Retry-After is either delta-seconds or an HTTP date (RFC 9110 §10.2.3); anything else is ignored. */
export function parseRetryAfterMs(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
