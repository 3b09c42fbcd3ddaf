import { Inject, Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { IdempotencyError, IdempotencyErrorCode } from './idempotency.errors';
import { MetricsService } from '../../metrics/metrics.service';
import { IdempotencyRepository } from './idempotency.repository';

export interface StoredAnswer {
  status: number;
  body: unknown;
  replayed: boolean;
}

/** A claim left in flight this long is taken to be a crashed request and may be taken over. */
const ABANDONED_AFTER_MS = 5 * 60_000;

export function fingerprint(method: string, route: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${route}\n${canonicalJson(body)}`)
    .digest('hex');
}

/** JSON with sorted keys, so {a,b} and {b,a} are the same request. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj)
      .filter((k) => obj[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Idempotency-Key in Postgres. The key is claimed "in flight" with an INSERT … ON CONFLICT DO
 * NOTHING (committed at once, so a parallel request with the key sees it and gets 409); the work
 * and the stored answer then commit in ONE transaction, so a crash can never leave a created run
 * without its key's answer. Same key + other request: 422. Keys live IDEMPOTENCY_KEY_TTL_MS (24 h).
 */
@Injectable()
export class IdempotencyService {
  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly keys: IdempotencyRepository,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute<T>(
    key: string,
    print: string,
    work: (em: EntityManager) => Promise<{ status: number; body: unknown; after?: T }>,
  ): Promise<StoredAnswer & { after?: T }> {
    const stored = await this.claim(key, print);
    if (stored) return stored;
    try {
      return await this.ds.transaction(async (em) => {
        const result = await work(em);
        await this.keys.complete(em, key, result.status, result.body);
        return { status: result.status, body: result.body, replayed: false, after: result.after };
      });
    } catch (err) {
      // Nothing was created: free the key so the client's retry can do the work.
      await this.keys.release(key).catch(() => undefined);
      throw err;
    }
  }

  /** null = the key is ours to do the work; otherwise the answer to give. */
  private async claim(key: string, print: string): Promise<StoredAnswer | null> {
    for (let i = 0; i < 3; i++) {
      if (await this.keys.claimInFlight(key, print, this.config.runs.idempotencyKeyTtlMs)) return null;
      const row = await this.keys.find(key, ABANDONED_AFTER_MS);
      if (!row) continue; // deleted in between: try the insert again
      if (row.expired || row.abandoned) {
        await this.keys.deleteIfStale(key, ABANDONED_AFTER_MS);
        continue;
      }
      if (row.fingerprint !== print) {
        throw new IdempotencyError(
          IdempotencyErrorCode.KEY_REUSED,
          'Idempotency-Key was already used with a different request',
        );
      }
      this.metrics.duplicate('idempotency_key');
      if (row.state === 'in_flight') {
        throw new IdempotencyError(
          IdempotencyErrorCode.IN_FLIGHT,
          'a request with this Idempotency-Key is still in flight',
          { 'Retry-After': '1' },
        );
      }
      return { status: row.response_status, body: row.response_body, replayed: true };
    }
    throw new IdempotencyError(IdempotencyErrorCode.CONTENDED, 'Idempotency-Key is contended; retry', {
      'Retry-After': '1',
    });
  }
}
