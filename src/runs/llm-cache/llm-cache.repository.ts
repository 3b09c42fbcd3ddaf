import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { queryRows } from '../../database/query-rows';
import type { AttemptRef } from '../steps/step-journal.repository';

export interface CachedAnswer {
  status: number;
  contentType: string | null;
  body: Buffer;
}

export interface NewCacheEntry extends CachedAnswer {
  scope: string;
  hash: string;
  provider: string;
  path: string;
  ttlMs: number;
}

/** Stored LLM answers: read by scope and key, written only by an attempt that holds its run. */
@Injectable()
export class LlmCacheRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  async lookup(scope: string, hash: string): Promise<CachedAnswer | undefined> {
    const rows = await queryRows<{ status: number; content_type: string | null; body: Buffer }>(
      this.ds,
      'SELECT status, content_type, body FROM llm_cache_entries WHERE scope = $1 AND request_hash = $2 AND expires_at > now()',
      [scope, hash],
    );
    const r = rows[0];
    return r && { status: r.status, contentType: r.content_type, body: r.body };
  }

  /**
   * Stores an answer if the attempt still holds its run (a zombie attempt records nothing), and
   * replaces an existing entry only once it has expired: the first answer stands.
   */
  async store(a: AttemptRef, e: NewCacheEntry): Promise<boolean> {
    const rows = await queryRows<{ scope: string }>(
      this.ds,
      `INSERT INTO llm_cache_entries (scope, request_hash, provider, path, status, content_type, body, expires_at)
       SELECT $3, $4, $5, $6, $7, $8, $9, now() + $10::bigint * interval '1 millisecond'
         FROM runs WHERE id = $1 AND fencing_token = $2::bigint AND status = 'RUNNING'
       ON CONFLICT ON CONSTRAINT pk_llm_cache_entries DO UPDATE
         SET provider = EXCLUDED.provider, path = EXCLUDED.path, status = EXCLUDED.status, content_type = EXCLUDED.content_type,
             body = EXCLUDED.body, created_at = now(), expires_at = EXCLUDED.expires_at
         WHERE llm_cache_entries.expires_at <= now()
       RETURNING scope`,
      [a.runId, a.fencingToken, e.scope, e.hash, e.provider, e.path, e.status, e.contentType, e.body, e.ttlMs],
    );
    return rows.length > 0;
  }

  /** Expired answers go (the scheduler calls this). */
  async prune(): Promise<number> {
    const rows = await queryRows<{ scope: string }>(
      this.ds,
      'DELETE FROM llm_cache_entries WHERE expires_at <= now() RETURNING scope',
    );
    return rows.length;
  }
}
