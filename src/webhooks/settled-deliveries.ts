import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { DeliveryStatus } from './webhook-delivery.entity';

/** How many settled deliveries this process remembers (Plane retries within minutes; a key is ~100 bytes). */
export const SETTLED_CAPACITY = 20_000;
/** How long one is remembered: Plane's retries come within ~50 minutes (5 × up to 600 s). */
export const SETTLED_TTL_MS = 60 * 60_000;
/** Duplicate counts are folded into their rows this often (one statement for all of them). */
export const FOLD_INTERVAL_MS = 1000;

const SETTLED = new Set<string>([DeliveryStatus.PROCESSED, DeliveryStatus.IGNORED, DeliveryStatus.DUPLICATE]);

/**
 * The deliveries this API process saw reach a final outcome (processed, ignored, duplicate),
 * by dedupe key. A retry of one of them — Plane resends byte-identical bodies — is answered
 * "duplicate" from memory, without a Postgres round trip; its duplicate count is folded into the
 * row later, in one statement for every delivery (counts of a process that dies before the next
 * fold are lost: they are statistics, nothing depends on them). A retry of a delivery this process
 * is processing right now waits for that attempt's row and is answered the same way. Any other
 * delivery not settled (accepted, failed) is not remembered: its retry must reach Postgres, which
 * may hand it the processing of a delivery whose first pass died. Each replica remembers what it
 * saw; a retry that lands on another replica costs that replica one statement, as before.
 */
@Injectable()
export class SettledDeliveries implements BeforeApplicationShutdown {
  private readonly logger = new Logger(SettledDeliveries.name);
  /** dedupe key → delivery id; Map keeps insertion order, so the first entries are the oldest. */
  private readonly settled = new Map<string, { id: string; until: number }>();
  private pending = new Map<string, { n: number; last: Date }>();
  /** Deliveries this process is recording or processing now: key → their row's id once it exists (null: none). */
  private readonly inProgress = new Map<string, Promise<string | null>>();
  private timer: NodeJS.Timeout | undefined;
  private folding: Promise<void> | undefined;

  constructor(private readonly deliveries: WebhookDeliveriesRepository) {}

  /** The delivery id of a settled delivery with this key, and the retry counted; undefined otherwise. */
  repeat(key: string): string | undefined {
    const hit = this.settled.get(key);
    if (!hit) return undefined;
    if (hit.until < Date.now()) {
      this.settled.delete(key);
      return undefined;
    }
    this.count(hit.id);
    return hit.id;
  }

  /**
   * A retry of a delivery this process is still working on: a sender that gave up waiting, which is
   * what an overloaded server sees. It waits here for the first attempt's row and is answered and
   * counted like a settled repeat, instead of queueing for Postgres, where it would wait for that
   * same row's lock and add to the load that made the sender give up. Undefined: none in progress,
   * or its insert failed (the caller goes on to Postgres itself).
   */
  async inProgressRepeat(key: string): Promise<string | undefined> {
    const id = await this.inProgress.get(key);
    if (!id) return undefined;
    this.count(id);
    return id;
  }

  /** `key` is in progress here until `done()`; `recorded(id)` once its row exists. */
  begin(key: string): { recorded(id: string): void; done(): void } {
    let resolve!: (id: string | null) => void;
    const mine = new Promise<string | null>((r) => (resolve = r));
    this.inProgress.set(key, mine);
    return {
      recorded: resolve,
      done: () => {
        resolve(null); // a no-op once recorded
        if (this.inProgress.get(key) === mine) this.inProgress.delete(key);
      },
    };
  }

  private count(id: string): void {
    const p = this.pending.get(id);
    if (p) {
      p.n++;
      p.last = new Date();
    } else this.pending.set(id, { n: 1, last: new Date() });
    this.timer ??= setTimeout(() => void this.fold(), FOLD_INTERVAL_MS).unref();
  }

  /**
   * Remembers a delivery whose outcome is final; anything else is ignored. `contentKey`, the key
   * of its exact bytes, when that is not its dedupe key already (an event id): a byte-identical
   * retry is then known before its body is read.
   */
  settle(key: string, id: string, status: DeliveryStatus | string, contentKey = key): void {
    if (!SETTLED.has(status)) return;
    const until = Date.now() + SETTLED_TTL_MS;
    for (const k of contentKey === key ? [key] : [key, contentKey]) {
      this.settled.delete(k);
      this.settled.set(k, { id, until });
      if (this.settled.size > SETTLED_CAPACITY) this.settled.delete(this.settled.keys().next().value!);
    }
  }

  /** Adds the counted retries to their rows: one statement. Kept for the next fold if Postgres is away. */
  async fold(): Promise<void> {
    this.timer = undefined;
    if (this.folding) return this.folding;
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.folding = this.deliveries
      .addDuplicates(batch)
      .then(() => undefined)
      .catch((err: unknown) => {
        for (const [id, p] of batch) {
          const now = this.pending.get(id);
          this.pending.set(id, { n: p.n + (now?.n ?? 0), last: now?.last ?? p.last });
        }
        this.logger.warn({
          msg: 'could not fold duplicate counts; trying again',
          deliveries: batch.size,
          err: String(err),
        });
        this.timer ??= setTimeout(() => void this.fold(), FOLD_INTERVAL_MS * 5).unref();
      })
      .finally(() => (this.folding = undefined));
    return this.folding;
  }

  /** Before the database connections close: the last counts go in. */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    await this.fold();
  }
}
