/**
 * Thrown from a guarded handler to have Bull run the job again after `retryDelayMs`: the job's
 * backoff strategy (see queue-settings.ts) reads the delay from the error. Postgres decides, at
 * the next claim, whether there is still anything to do.
 */
export class RetryLaterError extends Error {
  constructor(
    readonly retryDelayMs: number,
    message: string,
  ) {
    super(message);
    this.name = 'RetryLaterError';
  }
}
