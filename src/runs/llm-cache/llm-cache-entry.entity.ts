import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A stored 2xx answer of an LLM provider, replayed byte for byte for the same request within its
 * scope (`run:<id>` or `project:<id>`). Never holds a request header: API keys are not stored.
 */
@Entity({ name: 'llm_cache_entries' })
@Index('ix_llm_cache_entries_expires', ['expiresAt'])
export class LlmCacheEntryEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_llm_cache_entries' })
  scope: string;

  /** SHA-256 of provider, path and the canonical JSON body (see request-key.ts). */
  @PrimaryColumn({ name: 'request_hash', type: 'text', primaryKeyConstraintName: 'pk_llm_cache_entries' })
  requestHash: string;

  @Column({ type: 'text' })
  provider: string;

  @Column({ type: 'text' })
  path: string;

  @Column({ type: 'integer' })
  status: number;

  @Column({ name: 'content_type', type: 'text', nullable: true })
  contentType: string | null;

  @Column({ type: 'bytea' })
  body: Buffer;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
