import { retryWithBackoff } from './backoff';
import { TimeoutError, withTimeout } from './with-timeout';

const transient = Object.assign(new Error('blip'), { transient: true });
const isTransient = (err: unknown) => (err as { transient?: boolean }).transient === true;

describe('retryWithBackoff', () => {
  it('retries a retryable failure with doubling, capped waits, and tells the attempt it was retried', async () => {
    const waits: number[] = [];
    const retried: boolean[] = [];
    let calls = 0;
    const result = await retryWithBackoff(
      async (r) => {
        retried.push(r);
        if (++calls < 4) throw transient;
        return 'done';
      },
      {
        retryable: isTransient,
        firstDelayMs: 1,
        maxDelayMs: 3,
        deadline: Date.now() + 5000,
        onRetry: (_, d) => waits.push(d),
      },
    );
    expect(result).toBe('done');
    expect(waits).toEqual([1, 2, 3]);
    expect(retried).toEqual([false, true, true, true]);
  });

  it('throws at once an error that is not retryable, and a retryable one after the deadline', async () => {
    let calls = 0;
    const boom = new Error('boom');
    await expect(
      retryWithBackoff(async () => (calls++, Promise.reject(boom)), {
        retryable: isTransient,
        firstDelayMs: 1,
        maxDelayMs: 1,
        deadline: Date.now() + 5000,
      }),
    ).rejects.toBe(boom);
    expect(calls).toBe(1);
    await expect(
      retryWithBackoff(async () => Promise.reject(transient), {
        retryable: isTransient,
        firstDelayMs: 1,
        maxDelayMs: 1,
        deadline: Date.now() - 1,
      }),
    ).rejects.toBe(transient);
  });
});

describe('withTimeout', () => {
  it('answers the promise when it is in time, a TimeoutError with the given message when it is not', async () => {
    expect(await withTimeout(Promise.resolve(7), 50, 'the test')).toBe(7);
    const never = new Promise<never>(() => undefined);
    await expect(withTimeout(never, 5, 'the test')).rejects.toThrow(new TimeoutError('the test', 5));
    await expect(withTimeout(never, 5, 'the test', 'lock extend timed out')).rejects.toThrow('lock extend timed out');
  });
});
