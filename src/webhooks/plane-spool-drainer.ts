import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { fullJitterDelayMs } from '../common/backoff';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { Heartbeat } from '../locks/heartbeat';
import { LockService } from '../locks/lock.service';
import { LOCK_SERVICE } from '../locks/locks.tokens';
import { MetricsService } from '../metrics/metrics.service';
import { PLANE } from './plane-event-handler';
import { PlaneIntakeService } from './plane-intake.service';
import { PlaneSpool } from './plane-spool';

/** How often an idle drainer looks at the spool (one LLEN). */
export const SPOOL_POLL_MS = 1000;
/** The drain lease; renewed every third of it while entries are processed. */
export const SPOOL_LEASE_MS = 15_000;
export const SPOOL_LOCK_KEY = 'plane-spool:drain';
/** An entry that fails this often for another reason than Postgres being away goes to the dead list. */
export const SPOOL_MAX_ENTRY_ATTEMPTS = 5;

export type DrainResult = 'empty' | 'busy' | 'unavailable' | 'failed' | 'lost';

/**
 * Drains the Plane spool into Postgres, in the processes that take Plane deliveries (api, all):
 * they spool, they should drain, and a scheduler that is down must not hold deliveries back. Every
 * such replica polls; a Redis lease (SPOOL_LOCK_KEY) lets one drain at a time, head first, so a
 * work item's entries keep their order. While Postgres stays away it backs off (INFRA_RETRY_*,
 * full jitter, capped) instead of polling; see PlaneSpool for what guarantees what.
 */
@Injectable()
export class PlaneSpoolDrainer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(PlaneSpoolDrainer.name);
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;
  /** Consecutive drains that ended on an unavailable Postgres or a failing entry: the backoff exponent. */
  private failures = 0;

  constructor(
    private readonly spool: PlaneSpool,
    private readonly intake: PlaneIntakeService,
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.plane.webhookSecrets.length > 0) this.schedule(0);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const run = this.drain()
        .catch((err: unknown): DrainResult => {
          this.logger.warn({ msg: 'could not drain the Plane spool', err: String(err) });
          return 'unavailable';
        })
        .then((result) => this.schedule(this.nextDelay(result)));
      this.running = run;
    }, delayMs);
    this.timer.unref();
  }

  private nextDelay(result: DrainResult): number {
    if (result === 'unavailable' || result === 'failed') {
      this.failures++;
      return Math.max(
        10,
        fullJitterDelayMs(
          this.failures,
          this.config.queue.infraRetryBaseDelayMs,
          this.config.queue.infraRetryMaxDelayMs,
        ),
      );
    }
    this.failures = 0;
    return SPOOL_POLL_MS;
  }

  /**
   * One pass: if the spool has entries and the lease is free, process them head first until the
   * spool is empty, Postgres is away, an entry fails, or the lease is lost. Public for tests.
   */
  async drain(): Promise<DrainResult> {
    if ((await this.spool.depth()) === 0) return 'empty';
    const lock = await this.locks.acquire(SPOOL_LOCK_KEY, SPOOL_LEASE_MS);
    if (!lock) return 'busy';
    const lease = new Heartbeat(() => this.locks.extend(lock, SPOOL_LEASE_MS), SPOOL_LEASE_MS, SPOOL_LOCK_KEY, {
      onError: (err) => this.logger.warn({ msg: 'spool lease heartbeat error', err: String(err) }),
    }).start();
    try {
      for (;;) {
        // Checked before each entry: a drainer that lost its lease (a long pause) stops taking new ones.
        if (lease.signal.aborted) return 'lost';
        if (this.stopped) return 'empty';
        const entry = await this.spool.head();
        if (!entry) return 'empty';
        let result;
        try {
          result = await this.intake.processSpooled(entry);
        } catch (err) {
          const attempts = await this.spool.failedAttempt(entry);
          this.logger.error({
            msg: 'spooled plane delivery failed',
            spoolId: entry.id,
            attempts,
            err: err instanceof Error ? err.stack : String(err),
          });
          if (attempts < SPOOL_MAX_ENTRY_ATTEMPTS) return 'failed';
          if (await this.spool.deadLetter(entry)) {
            this.metrics.spool.inc({ provider: PLANE, outcome: 'dead_lettered' });
            this.logger.error({
              msg: 'spooled plane delivery moved to the dead list',
              spoolId: entry.id,
              workItemId: entry.workItemId,
            });
          }
          continue;
        }
        if (result === 'unavailable') return 'unavailable';
        if (await this.spool.done(entry)) this.metrics.spool.inc({ provider: PLANE, outcome: 'drained' });
      }
    } finally {
      lease.stop();
      await this.locks.release(lock).catch(() => undefined);
      await this.spool.depth().catch(() => undefined);
    }
  }
}
