import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { queryRows } from '../../database/query-rows';
import { PK_IDEMPOTENCY_KEYS } from './idempotency-key.entity';

export interface StoredKey {
  fingerprint: string;
  state: 'in_flight' | 'completed';
  response_status: number;
  response_body: unknown;
  expired: boolean;
  abandoned: boolean;
}

/** The statements on idempotency_keys. */
@Injectable()
export class IdempotencyRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  /** Claims the key "in flight", committed at once; false: someone holds it already. */
  async claimInFlight(key: string, fingerprint: string, ttlMs: number): Promise<boolean> {
    const inserted = await queryRows(
      this.ds,
      `INSERT INTO idempotency_keys (key, fingerprint, state, expires_at)
       VALUES ($1, $2, 'in_flight', now() + $3 * interval '1 millisecond')
       ON CONFLICT ON CONSTRAINT ${PK_IDEMPOTENCY_KEYS} DO NOTHING RETURNING key`,
      [key, fingerprint, ttlMs],
    );
    return inserted.length > 0;
  }

  /** The stored key; `abandoned`: in flight for longer than `abandonedAfterMs`. */
  async find(key: string, abandonedAfterMs: number): Promise<StoredKey | null> {
    const rows = await queryRows<StoredKey>(
      this.ds,
      `SELECT fingerprint, state, response_status, response_body, expires_at < now() AS expired,
              (state = 'in_flight' AND created_at < now() - $2 * interval '1 millisecond') AS abandoned
         FROM idempotency_keys WHERE key = $1`,
      [key, abandonedAfterMs],
    );
    return rows[0] ?? null;
  }

  /** Deletes the key only if it expired or was abandoned (checked again: another request may have taken it over). */
  async deleteIfStale(key: string, abandonedAfterMs: number): Promise<void> {
    await this.ds.query(
      `DELETE FROM idempotency_keys WHERE key = $1 AND (expires_at < now() OR (state = 'in_flight' AND created_at < now() - $2 * interval '1 millisecond'))`,
      [key, abandonedAfterMs],
    );
  }

  /** Stores the answer in the transaction that did the work. */
  async complete(em: EntityManager, key: string, status: number, body: unknown): Promise<void> {
    await em.query(
      `UPDATE idempotency_keys SET state = 'completed', response_status = $2, response_body = $3::jsonb WHERE key = $1`,
      [key, status, JSON.stringify(body)],
    );
  }

  /** Frees a key whose work failed, so the client's retry can do it. */
  async release(key: string): Promise<void> {
    await this.ds.query(`DELETE FROM idempotency_keys WHERE key = $1 AND state = 'in_flight'`, [key]);
  }

  async pruneExpired(): Promise<number> {
    const rows = await queryRows(this.ds, 'DELETE FROM idempotency_keys WHERE expires_at < now() RETURNING key');
    return rows.length;
  }
}
