import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { RunEntity } from './run.entity';

/** One row per status transition, written in the same transaction as the transition. */
@Entity({ name: 'run_events' })
@Index('ix_run_events_run', ['runId', 'id'])
export class RunEventEntity {
  @PrimaryGeneratedColumn('increment', { type: 'bigint', primaryKeyConstraintName: 'pk_run_events' })
  id: string;

  @Column({ name: 'run_id', type: 'uuid' })
  runId: string;

  @ManyToOne(() => RunEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'run_id', foreignKeyConstraintName: 'fk_run_events_run' })
  run?: RunEntity;

  @Column({ name: 'from_status', type: 'text', nullable: true })
  fromStatus: string | null;

  @Column({ name: 'to_status', type: 'text' })
  toStatus: string;

  @Column({ type: 'integer' })
  attempt: number;

  @Column({ name: 'fencing_token', type: 'bigint' })
  fencingToken: string;

  @Column({ name: 'worker_id', type: 'text', nullable: true })
  workerId: string | null;

  @Column({ type: 'text', nullable: true })
  reason: string | null;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  at: Date;
}
