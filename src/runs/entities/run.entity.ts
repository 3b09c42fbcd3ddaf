import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';
import { TaskEntity } from '../../tasks/task.entity';
import { RunKind, RunStatus } from '../run-status';
import { ProjectEntity } from './project.entity';

/** A task has at most one authoring run. */
export const UX_RUNS_TASK_AUTHORING = 'ux_runs_task_authoring';

@Entity({ name: 'runs' })
@Check('ck_runs_status', `"status" IN ('PENDING','QUEUED','RUNNING','RETRYING','SUCCESS','FAILED','CANCELLED')`)
@Check('ck_runs_kind', `"kind" IN ('manual','authoring')`)
@Index('ix_runs_project_status', ['projectId', 'status'])
@Index('ix_runs_status_lease', ['status', 'leaseExpiresAt'])
@Index('ix_runs_created', ['createdAt', 'id'])
@Index(UX_RUNS_TASK_AUTHORING, ['taskId'], { unique: true, where: `"kind" = 'authoring'` })
export class RunEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_runs' })
  id: string;

  @Column({ name: 'project_id', type: 'uuid' })
  projectId: string;

  @ManyToOne(() => ProjectEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'project_id', foreignKeyConstraintName: 'fk_runs_project' })
  project?: ProjectEntity;

  @Column({ name: 'task_id', type: 'uuid', nullable: true })
  taskId: string | null;

  @ManyToOne(() => TaskEntity, { onDelete: 'SET NULL', nullable: true })
  @JoinColumn({ name: 'task_id', foreignKeyConstraintName: 'fk_runs_task' })
  task?: TaskEntity | null;

  @Column({ type: 'text', default: RunKind.MANUAL })
  kind: RunKind;

  @Column({ type: 'text' })
  requirement: string;

  @Column({ type: 'text', default: RunStatus.PENDING })
  status: RunStatus;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  /** The fencing token of the newest claim; a finalize must present it to write. */
  @Column({ name: 'fencing_token', type: 'bigint', default: 0 })
  fencingToken: string;

  @Column({ name: 'lease_owner', type: 'text', nullable: true })
  leaseOwner: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  /** Bumped on every (re-)dispatch; part of the Bull job id so a new series is never swallowed. */
  @Column({ name: 'dispatch_generation', type: 'integer', default: 0 })
  dispatchGeneration: number;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  @Column({ name: 'output_tail', type: 'text', nullable: true })
  outputTail: string | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt: Date | null;

  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true })
  finishedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
