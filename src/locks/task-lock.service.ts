import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import type { Job, Queue } from 'bull';
import { isDbUnavailableError } from '../database/pg-errors';
import { MetricsService } from '../metrics/metrics.service';
import { Heartbeat, LockLostError, ShutdownAbort } from './heartbeat';
import { LockHandle, LockService } from './lock.service';
import { LOCK_SERVICE } from './locks.tokens';
import { RetryLaterError } from './retry-later.error';

/** What a guarded handler holds while it works: the lock, its fencing token and a kill switch. */
export interface Lease {
  readonly key: string;
  readonly owner: string;
  readonly token: number;
  /** Aborted the moment the lock is lost (extend failed or late) or a beat check says so. */
  readonly signal: AbortSignal;
  /** Until when (ms since the epoch) the lock is surely ours; moves on with every renewal. */
  readonly validUntil: number;
  /** Adds work to every heartbeat; resolving false aborts the lease. */
  onBeat(check: () => Promise<boolean>): void;
}

export interface GuardedProcessorSpec<T> {
  /** For logs and metrics. */
  name: string;
  concurrency: number;
  ttlMs: number;
  lockKey: (job: Job<T>) => string;
  /**
   * The handler's work is fenced by a lease of its own in Postgres (a run's lease and fencing
   * token, a notification's claim), checked on every beat. Then a lock key that vanished while
   * held (Redis restarted without persistence, a flushed prefix) is set again for the same owner
   * instead of aborting the work: killing a command that is finishing would only make the next
   * attempt run it again. A key held by another owner is still a loss.
   */
  fencedInPostgres?: boolean;
  handler: (job: Job<T>, lease: Lease) => Promise<unknown>;
}

/**
 * The interceptor around every queue processor: acquire the job's lock, heartbeat it, hand the
 * handler a lease, release in `finally`. `process()` is the only way onceflow registers a Bull
 * processor; ProcessorGuardCheck refuses to boot if a raw `@Process()` handler exists.
 */
@Injectable()
export class TaskLockService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(TaskLockService.name);
  private readonly active = new Map<string, { handle: LockHandle; heartbeat: Heartbeat; done: Promise<unknown> }>();
  private readonly queues: Queue[] = [];
  readonly guardedQueues = new Set<string>();
  private shuttingDown = false;

  constructor(
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    private readonly metrics: MetricsService,
  ) {}

  process<T>(queue: Queue<T>, spec: GuardedProcessorSpec<T>): void {
    this.guardedQueues.add(queue.name);
    this.queues.push(queue as Queue);
    handleWorkerNameRejection(queue);
    // process() resolves/rejects only when the queue closes; a rejection then is not an error.
    queue
      .process(spec.concurrency, (job: Job<T>) => this.runGuarded(job, spec))
      .catch((err: unknown) => {
        if (!this.shuttingDown)
          this.logger.error({ msg: 'queue processing stopped', queue: queue.name, err: String(err) });
      });
  }

  async runGuarded<T>(job: Job<T>, spec: GuardedProcessorSpec<T>): Promise<unknown> {
    const key = spec.lockKey(job);
    let handle: LockHandle | null;
    const askedAt = Date.now();
    try {
      handle = await this.locks.acquire(key, spec.ttlMs);
    } catch (err) {
      this.infraRetry(spec, job, err, 'redis');
      throw err;
    }
    if (!handle) {
      this.metrics.lockAcquisitions.inc({ result: 'busy' });
      this.metrics.duplicate('run_lock');
      // Someone holds it: a duplicate job, or a holder that may have died. Look again once its
      // lock can have lapsed; the claim in Postgres then tells whether anything is left to do.
      const remaining = Math.max(0, await this.locks.remainingMs(key));
      const delay = remaining + 50 + Math.floor(Math.random() * 200);
      this.logger.log({
        msg: 'lock busy, job skipped for now',
        processor: spec.name,
        jobId: job.id,
        lockKey: key,
        retryInMs: delay,
      });
      throw new RetryLaterError(delay, `lock ${key} is held by another worker`);
    }
    this.metrics.lockAcquisitions.inc({ result: 'acquired' });
    const checks: Array<() => Promise<boolean>> = [];
    const extend = spec.fencedInPostgres
      ? async () => {
          const r = await this.locks.extendOrRetake(handle, handle.ttlMs);
          if (r === 'retaken') {
            this.metrics.lockAcquisitions.inc({ result: 'retaken' });
            this.logger.warn({
              msg: 'lock key vanished from Redis; taken again',
              processor: spec.name,
              jobId: job.id,
              lockKey: key,
            });
          }
          return r !== 'lost';
        }
      : () => this.locks.extend(handle, handle.ttlMs);
    const heartbeat = new Heartbeat(extend, handle.ttlMs, key, {
      onBeat: async () => {
        for (const check of checks) if (!(await check())) return false;
        return true;
      },
      onError: (err) => this.logger.warn({ msg: 'heartbeat error', lockKey: key, err: String(err) }),
      askedAt,
    }).start();
    heartbeat.signal.addEventListener('abort', () => {
      if (heartbeat.signal.reason instanceof ShutdownAbort) return;
      const reason = heartbeat.signal.reason instanceof LockLostError ? heartbeat.signal.reason.reason : 'unknown';
      this.metrics.lockLosses.inc({ reason });
      this.logger.warn({ msg: 'lock lost', processor: spec.name, jobId: job.id, lockKey: key, reason });
    });
    const activeId = `${key}#${handle.owner}`;
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    this.active.set(activeId, { handle, heartbeat, done });
    const lease: Lease = {
      key,
      owner: handle.owner,
      token: handle.token,
      signal: heartbeat.signal,
      get validUntil() {
        return heartbeat.validUntil;
      },
      onBeat: (check) => checks.push(check),
    };
    try {
      return await spec.handler(job, lease);
    } catch (err) {
      if (!(err instanceof RetryLaterError)) this.infraRetry(spec, job, err, infraReason(err));
      throw err;
    } finally {
      heartbeat.stop();
      await this.locks
        .release(handle)
        .catch((err) => this.logger.warn({ msg: 'lock release failed', lockKey: key, err: String(err) }));
      this.active.delete(activeId);
      settle();
    }
  }

  /**
   * Any error but RetryLaterError: Bull retries the job after infraRetryDelayMs (exponential,
   * jittered, capped: see queue-settings.ts). Counted so an outage shows on /metrics.
   */
  private infraRetry<T>(spec: GuardedProcessorSpec<T>, job: Job<T>, err: unknown, reason: InfraReason): void {
    this.metrics.infraRetries.inc({ queue: spec.name, reason });
    this.logger.error({
      msg: 'job failed; Bull retries it with backoff',
      processor: spec.name,
      jobId: job.id,
      attempt: job.attemptsMade + 1,
      reason,
      err: err instanceof Error ? err.stack : String(err),
    });
  }

  /** Leases held right now (graceful shutdown and tests look at these). */
  activeLeaseCount(): number {
    return this.active.size;
  }

  /**
   * Graceful shutdown (SIGTERM): stop taking jobs, abort every lease with ShutdownAbort (handlers
   * kill their commands and hand their work back to the queue at once), wait for the handlers to
   * release their locks. Runs before the queues and Redis connections close.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    await Promise.all(this.queues.map((q) => q.pause(true, true).catch(() => undefined)));
    const running = [...this.active.values()];
    if (running.length) this.logger.warn({ msg: 'shutting down: handing over running jobs', count: running.length });
    for (const { heartbeat } of running) heartbeat.abort(new ShutdownAbort());
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(running.map((r) => r.done)), new Promise((r) => (timer = setTimeout(r, 15_000)))]);
    clearTimeout(timer);
  }
}

/**
 * Bull 4's process() starts setWorkerName() (CLIENT SETNAME on its blocking connection) and drops
 * the promise: a queue closed while that connection is still coming up (a worker stopped moments
 * after it started, a deploy rolled back) rejects it with nobody to handle it, and Node ends the
 * process on an unhandled rejection. The name only labels the connection in CLIENT LIST.
 */
function handleWorkerNameRejection(queue: Queue<unknown>): void {
  const q = queue as Queue<unknown> & { setWorkerName?: () => Promise<unknown> };
  const setWorkerName = q.setWorkerName?.bind(queue);
  if (setWorkerName) q.setWorkerName = () => setWorkerName().catch(() => undefined);
}

type InfraReason = 'postgres' | 'redis' | 'error';

/** A metric label, not a decision: every reason is retried the same way. */
function infraReason(err: unknown): InfraReason {
  if (isDbUnavailableError(err)) return 'postgres';
  const e = err as { name?: string; message?: string };
  if (e?.name === 'MaxRetriesPerRequestError' || /Connection is closed|Stream isn't writeable/.test(e?.message ?? ''))
    return 'redis';
  return 'error';
}
