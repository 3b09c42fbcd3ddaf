import { Check, Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { RunEntity } from '../entities/run.entity';

/** `onceflow put KEY` / `onceflow get KEY`: small values a run keeps across its attempts. */
@Entity({ name: 'run_values' })
@Check('ck_run_values_key', `"key" ~ '^[A-Za-z0-9._:-]{1,128}$'`)
export class RunValueEntity {
  @PrimaryColumn({ name: 'run_id', type: 'uuid', primaryKeyConstraintName: 'pk_run_values' })
  runId: string;

  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_run_values' })
  key: string;

  @ManyToOne(() => RunEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'run_id', foreignKeyConstraintName: 'fk_run_values_run' })
  run?: RunEntity;

  @Column({ type: 'bytea' })
  value: Buffer;

  /** The fencing token of the attempt that wrote it. */
  @Column({ name: 'fencing_token', type: 'bigint' })
  fencingToken: string;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
