export class TimeoutError extends Error {
  constructor(what: string, ms: number, message = `${what} took longer than ${ms} ms`) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/**
 * `p`, or a TimeoutError after `ms`. `p` itself is not cancelled (a Redis command stays queued
 * and may still run): use it where a late success is harmless.
 */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string, message?: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms, message)), Math.max(1, ms));
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
