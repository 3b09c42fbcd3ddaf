import { Inject, Injectable, Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { Batcher } from '../common/batcher';
import { withTimeout } from '../common/with-timeout';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { REDIS_CLIENT } from '../locks/locks.tokens';
import { MetricsService } from '../metrics/metrics.service';
import { PLANE } from './plane-event-handler';

/** A verified Plane delivery waiting for Postgres. */
export interface SpoolEntry {
  id: string;
  spooledAt: number;
  /** Computed on arrival from the raw bytes (v1) or event_id (v2): the same key as a direct intake. */
  dedupeKey: string;
  workItemId: string;
  externalDeliveryId: string | null;
  /** Set when the delivery row was written before Postgres went away: only its processing is owed. */
  deliveryId: string | null;
  /** The parsed body, serialised again (its nesting is bounded; NUL and lone surrogates survive as escapes). */
  body: string;
}

/** A runaway guard, not a sizing: Redis' maxmemory (noeviction) usually refuses writes first. */
export const SPOOL_MAX_ENTRIES = 100_000;
/** Plane gives up after 30 s: a spool that cannot answer in this is treated as unavailable (503). */
const PUSH_TIMEOUT_MS = 2000;
const LOOKUP_TIMEOUT_MS = 500;
/** Most work items one spool lookup asks about. */
const LOOKUP_BATCH_MAX = 64;

// KEYS[1] entries, KEYS[2] items; ARGV[1] entry, ARGV[2] work item, ARGV[3] max entries.
const PUSH = `
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return redis.call('RPUSH', KEYS[1], ARGV[1])`;

// Compare-and-pop: removes the head only if it is still the entry the caller processed (its id is
// the prefix up to the first newline). KEYS[1] entries, KEYS[2] items, KEYS[3] attempts,
// KEYS[4] dead; ARGV[1] id, ARGV[2] work item, ARGV[3] '1' to move it to the dead list.
const REMOVE_HEAD = `
local head = redis.call('LINDEX', KEYS[1], 0)
local prefix = ARGV[1] .. '\\n'
if not head or string.sub(head, 1, #prefix) ~= prefix then return 0 end
redis.call('LPOP', KEYS[1])
if redis.call('HINCRBY', KEYS[2], ARGV[2], -1) <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[3] == '1' then redis.call('RPUSH', KEYS[4], head) end
return 1`;

function encode(e: SpoolEntry): string {
  const { id, ...rest } = e;
  return `${id}\n${JSON.stringify(rest)}`;
}

function decode(raw: string): SpoolEntry {
  const cut = raw.indexOf('\n');
  return { id: raw.slice(0, cut), ...(JSON.parse(raw.slice(cut + 1)) as Omit<SpoolEntry, 'id'>) };
}

/**
 * The durable spool of Plane deliveries that arrived while Postgres was unreachable: ONE Redis
 * list, oldest first, under REDIS_PREFIX (as durable as Redis is: run it with AOF, as the compose
 * file does). What guarantees what:
 * - nothing is lost: an entry leaves the list only after it was processed, by a compare-and-pop of
 *   that very entry (REMOVE_HEAD), never by a pop before processing;
 * - one drainer at a time (PlaneSpoolDrainer, under a Redis lease), taking the head only, so the
 *   entries of a work item are processed in arrival order; a new delivery for a work item that
 *   still has entries here is spooled behind them (holdsWorkItem) instead of overtaking them;
 * - exactly-once effects come from Postgres, as for every delivery: a drainer that dies or loses
 *   its lease mid-entry leaves the entry at the head, and the next one runs it again through the
 *   same idempotent path (delivery dedupe key, one task per work item).
 */
@Injectable()
export class PlaneSpool {
  private readonly logger = new Logger(PlaneSpool.name);
  private readonly keys: { entries: string; items: string; attempts: string; dead: string };
  private readonly lookups: Batcher<string, boolean>;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    const base = `${config.redis.prefix}:plane-spool`;
    this.keys = {
      entries: `${base}:entries`,
      items: `${base}:items`,
      attempts: `${base}:attempts`,
      dead: `${base}:dead`,
    };
    this.lookups = new Batcher((ids) => this.lookUp(ids), {
      maxSize: LOOKUP_BATCH_MAX,
      key: (id) => id,
      isolate: () => false,
    });
  }

  /**
   * Throws when Redis cannot take it: not connected (refused at once, so no command lingers in the
   * client's offline queue to land after we answered 503), too slow, or the spool is full.
   */
  async push(e: Omit<SpoolEntry, 'id' | 'spooledAt'>): Promise<SpoolEntry> {
    if (this.redis.status !== 'ready') throw new Error(`Redis is not connected (${this.redis.status})`);
    const entry: SpoolEntry = { id: randomUUID(), spooledAt: Date.now(), ...e };
    const length = Number(
      await withTimeout(
        this.redis.eval(
          PUSH,
          2,
          this.keys.entries,
          this.keys.items,
          encode(entry),
          entry.workItemId,
          SPOOL_MAX_ENTRIES,
        ),
        PUSH_TIMEOUT_MS,
        'spooling a delivery',
      ),
    );
    if (length < 0) throw new Error(`the Plane spool is full (${SPOOL_MAX_ENTRIES} entries)`);
    this.metrics.spool.inc({ provider: PLANE, outcome: 'spooled' });
    this.metrics.spoolDepth.set({ provider: PLANE }, length);
    return entry;
  }

  /**
   * True when entries of this work item wait here: a new delivery for it must queue behind them.
   * Asked of Redis every time: a per-process "spool is empty" cache let a replica that had not
   * looked for a second overtake another replica's spooled entries. The lookups of one turn of the
   * event loop share one HMGET (under load, several new deliveries arrive per turn). Redis not
   * connected or slow: false (we cannot know; the delivery goes on to Postgres).
   */
  async holdsWorkItem(workItemId: string): Promise<boolean> {
    if (this.redis.status !== 'ready') return false;
    try {
      return await this.lookups.submit(workItemId);
    } catch (err) {
      this.logger.warn({
        msg: 'could not look at the Plane spool; the delivery goes to Postgres directly',
        workItemId,
        err: String(err),
      });
      return false;
    }
  }

  private async lookUp(workItemIds: string[]): Promise<boolean[]> {
    const counts = await withTimeout(
      this.redis.hmget(this.keys.items, ...workItemIds),
      LOOKUP_TIMEOUT_MS,
      'the spool lookup',
    );
    return counts.map((n) => n !== null);
  }

  /** The number of waiting entries; also refreshes the gauge. */
  async depth(): Promise<number> {
    const n = await this.redis.llen(this.keys.entries);
    this.metrics.spoolDepth.set({ provider: PLANE }, n);
    return n;
  }

  async head(): Promise<SpoolEntry | null> {
    const raw = await this.redis.lindex(this.keys.entries, 0);
    return raw === null ? null : decode(raw);
  }

  /** Removes a processed entry; false when it is no longer the head (another drainer did it). */
  async done(e: SpoolEntry): Promise<boolean> {
    return this.removeHead(e, false);
  }

  /** Moves an entry that keeps failing for other reasons than Postgres being away to the dead list. */
  async deadLetter(e: SpoolEntry): Promise<boolean> {
    return this.removeHead(e, true);
  }

  /** Counts a failed attempt of an entry (kept across drainers); answers the count so far. */
  async failedAttempt(e: SpoolEntry): Promise<number> {
    return this.redis.hincrby(this.keys.attempts, e.id, 1);
  }

  private async removeHead(e: SpoolEntry, dead: boolean): Promise<boolean> {
    const removed = Number(
      await this.redis.eval(
        REMOVE_HEAD,
        4,
        this.keys.entries,
        this.keys.items,
        this.keys.attempts,
        this.keys.dead,
        e.id,
        e.workItemId,
        dead ? '1' : '0',
      ),
    );
    return removed === 1;
  }
}
