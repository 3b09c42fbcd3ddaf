import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn, Unique, UpdateDateColumn } from 'typeorm';

export const UQ_PROJECTS_NAME = 'uq_projects_name';
export const UX_PROJECTS_EXTERNAL_REF = 'ux_projects_external_ref';

@Entity({ name: 'projects' })
@Unique(UQ_PROJECTS_NAME, ['name'])
@Index(UX_PROJECTS_EXTERNAL_REF, ['externalProvider', 'externalId'], {
  unique: true,
  where: '"external_provider" IS NOT NULL AND "external_id" IS NOT NULL',
})
export class ProjectEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_projects' })
  id: string;

  @Column({ type: 'text' })
  name: string;

  /** Absolute path of the project's workspace; task workspaces live under it. */
  @Column({ name: 'workspace_path', type: 'text' })
  workspacePath: string;

  @Column({ name: 'max_concurrent_runs', type: 'integer', default: 1 })
  maxConcurrentRuns: number;

  @Column({ name: 'external_provider', type: 'text', nullable: true })
  externalProvider: string | null;

  @Column({ name: 'external_id', type: 'text', nullable: true })
  externalId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
