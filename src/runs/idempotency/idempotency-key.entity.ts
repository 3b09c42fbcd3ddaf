import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

export const PK_IDEMPOTENCY_KEYS = 'pk_idempotency_keys';

/** An Idempotency-Key of POST /api/projects/:id/runs: in flight, then the stored answer. */
@Entity({ name: 'idempotency_keys' })
@Check('ck_idempotency_keys_state', `"state" IN ('in_flight','completed')`)
@Index('ix_idempotency_keys_expires', ['expiresAt'])
export class IdempotencyKeyEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: PK_IDEMPOTENCY_KEYS })
  key: string;

  /** SHA-256 of method, route and canonical body: the same key with another request is a 422. */
  @Column({ type: 'text' })
  fingerprint: string;

  @Column({ type: 'text' })
  state: 'in_flight' | 'completed';

  @Column({ name: 'response_status', type: 'integer', nullable: true })
  responseStatus: number | null;

  @Column({ name: 'response_body', type: 'jsonb', nullable: true })
  responseBody: unknown;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
