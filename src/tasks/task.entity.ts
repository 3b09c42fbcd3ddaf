import {
  Column,
  CreateDateColumn,
  Entity,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';
import { ProjectEntity } from '../runs/entities/project.entity';

/** The business key of an external work item: at most one task per (provider, external id). */
export const UX_TASKS_EXTERNAL_REF = 'ux_tasks_external_ref';

export enum TaskStatus {
  OPEN = 'open',
  CANCELLED = 'cancelled',
}

@Entity({ name: 'tasks' })
@Index(UX_TASKS_EXTERNAL_REF, ['externalProvider', 'externalId'], {
  unique: true,
  where: '"external_provider" IS NOT NULL AND "external_id" IS NOT NULL',
})
@Index('ix_tasks_project', ['projectId'])
export class TaskEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_tasks' })
  id: string;

  @Column({ name: 'project_id', type: 'uuid' })
  projectId: string;

  @ManyToOne(() => ProjectEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'project_id', foreignKeyConstraintName: 'fk_tasks_project' })
  project?: ProjectEntity;

  @Column({ name: 'external_provider', type: 'text', nullable: true })
  externalProvider: string | null;

  @Column({ name: 'external_id', type: 'text', nullable: true })
  externalId: string | null;

  @Column({ type: 'text', nullable: true })
  url: string | null;

  @Column({ type: 'text' })
  title: string;

  @Column({ type: 'jsonb', default: () => "'{}'" })
  metadata: Record<string, unknown>;

  @Column({ type: 'text', default: TaskStatus.OPEN })
  status: TaskStatus;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
