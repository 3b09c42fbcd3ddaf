import { NOTIFY_RETRY_MAX_DELAY_MS, notificationRetryDelayMs, parseRetryAfterMs } from './retry-backoff';

describe('notification retry backoff', () => {
  it('doubles from the base delay, with up to half of it random', () => {
    expect(notificationRetryDelayMs(1, 2000, undefined, () => 0)).toBe(1000);
    expect(notificationRetryDelayMs(1, 2000, undefined, () => 1)).toBe(2000);
    expect(notificationRetryDelayMs(3, 2000, undefined, () => 0)).toBe(4000);
    expect(notificationRetryDelayMs(3, 2000, undefined, () => 1)).toBe(8000);
  });

  it('is capped', () => {
    expect(notificationRetryDelayMs(40, 2000, undefined, () => 1)).toBe(NOTIFY_RETRY_MAX_DELAY_MS);
    expect(notificationRetryDelayMs(1, 2000, 10 * NOTIFY_RETRY_MAX_DELAY_MS)).toBe(NOTIFY_RETRY_MAX_DELAY_MS);
  });

  it("lets a 429's Retry-After win over the formula", () => {
    expect(notificationRetryDelayMs(5, 2000, 1000, () => 1)).toBe(1000);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(parseRetryAfterMs('1')).toBe(1000);
    expect(parseRetryAfterMs(' 30 ')).toBe(30_000);
    const now = Date.parse('2026-11-29T12:00:00Z');
    expect(parseRetryAfterMs('Sun, 29 Nov 2026 12:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfterMs('soon')).toBeUndefined();
    // Digits only, all of it: a number with anything before or after is not delta-seconds.
    expect(parseRetryAfterMs('12abc')).toBeUndefined();
    expect(parseRetryAfterMs('abc12')).toBeUndefined();
    expect(parseRetryAfterMs(null)).toBeUndefined();
  });
});
