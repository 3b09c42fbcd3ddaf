import { Check, Column, Entity, JoinColumn, ManyToOne, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { RunEntity } from '../entities/run.entity';

/** One journal row per (run, step name): a step is DONE at most once per run. */
export const UQ_RUN_STEPS_RUN_NAME = 'uq_run_steps_run_name';

export enum StepStatus {
  STARTED = 'STARTED',
  DONE = 'DONE',
}

/**
 * The step journal of a run. Written only by the attempt that holds the run's current fencing
 * token (every write is one conditional statement, see StepJournalRepository); `output` is the
 * recorded stdout of a DONE step, replayed to later attempts instead of running the step again.
 */
@Entity({ name: 'run_steps' })
@Unique(UQ_RUN_STEPS_RUN_NAME, ['runId', 'name'])
@Check('ck_run_steps_status', `"status" IN ('STARTED','DONE')`)
@Check('ck_run_steps_name', `"name" ~ '^[A-Za-z0-9._:-]{1,128}$'`)
export class RunStepEntity {
  /** Insertion order = order of first start (GET /api/runs/:id/steps). */
  @PrimaryGeneratedColumn('increment', { type: 'bigint', primaryKeyConstraintName: 'pk_run_steps' })
  id: string;

  @Column({ name: 'run_id', type: 'uuid' })
  runId: string;

  @ManyToOne(() => RunEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'run_id', foreignKeyConstraintName: 'fk_run_steps_run' })
  run?: RunEntity;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  status: StepStatus;

  /** The attempt that started it last (or recorded it DONE). */
  @Column({ type: 'integer' })
  attempt: number;

  @Column({ name: 'fencing_token', type: 'bigint' })
  fencingToken: string;

  /** How many times the step's command was started, over all attempts. */
  @Column({ type: 'integer', default: 1 })
  starts: number;

  /** The last exit code of the step's command (null while it runs for the first time). */
  @Column({ name: 'exit_code', type: 'integer', nullable: true })
  exitCode: number | null;

  @Column({ type: 'bytea', nullable: true })
  output: Buffer | null;

  @Column({ name: 'output_bytes', type: 'integer', default: 0 })
  outputBytes: number;

  @Column({ name: 'started_at', type: 'timestamptz' })
  startedAt: Date;

  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true })
  finishedAt: Date | null;
}
