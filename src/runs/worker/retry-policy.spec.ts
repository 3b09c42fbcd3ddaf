import { retryCeilingMs, retryDelayMs } from './retry-policy';

describe('retry policy (exponential backoff, full jitter)', () => {
  it('doubles the ceiling per attempt up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => retryCeilingMs(n, 1000, 10_000))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
  });

  it('draws uniformly between 0 and the ceiling', () => {
    expect(retryDelayMs(3, 1000, 10_000, () => 0)).toBe(0);
    expect(retryDelayMs(3, 1000, 10_000, () => 0.5)).toBe(2000);
    expect(retryDelayMs(3, 1000, 10_000, () => 0.999999)).toBe(4000);
    for (let i = 0; i < 1000; i++) expect(retryDelayMs(30, 1000, 120_000)).toBeLessThanOrEqual(120_000);
  });
});
