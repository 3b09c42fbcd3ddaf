import type { AppConfig } from '../config/app-config';
import { BACKOFF, infraRetryDelayMs, queueOptions } from './queue-settings';

const queue = { infraRetryBaseDelayMs: 100, infraRetryMaxDelayMs: 1000 } as AppConfig['queue'];

describe('queue backoff', () => {
  const strategy = queueOptions({ queue, redis: { url: 'redis://x', prefix: 'p' } } as AppConfig).settings!
    .backoffStrategies![BACKOFF] as (attemptsMade: number, err: Error) => number;

  it('keeps the delay a RetryLaterError asks for', () => {
    expect(strategy(50, Object.assign(new Error('later'), { retryDelayMs: 1234.4 }))).toBe(1234);
  });

  it('backs off any other error exponentially, jittered, capped', () => {
    const max = (attempt: number) =>
      Math.max(...Array.from({ length: 2000 }, () => strategy(attempt, new Error('ECONNREFUSED'))));
    expect(max(1)).toBeLessThanOrEqual(100);
    expect(max(3)).toBeLessThanOrEqual(400);
    expect(max(3)).toBeGreaterThan(200);
    expect(max(40)).toBeLessThanOrEqual(1000);
    expect(max(40)).toBeGreaterThan(800);
    expect(infraRetryDelayMs(5, queue)).toBeGreaterThanOrEqual(1);
  });
});
