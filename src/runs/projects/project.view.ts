import { ApiProperty } from '@nestjs/swagger';
import { ProjectEntity } from '../entities/project.entity';

/** The API shape of a project (contract: POST /api/projects, GET /api/projects[/:id]). */
export class ProjectView {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'checkout-service' })
  name: string;

  @ApiProperty({ description: 'Absolute path of the workspace; task workspaces live under it' })
  workspacePath: string;

  @ApiProperty({ type: 'integer', minimum: 1, description: 'Cap on RUNNING runs of the project' })
  maxConcurrentRuns: number;

  @ApiProperty({
    type: String,
    nullable: true,
    example: 'plane',
    description: 'Set for a project created from a Plane project',
  })
  externalProvider: string | null;

  @ApiProperty({ type: String, nullable: true, description: 'The external project id (for Plane: its project id)' })
  externalId: string | null;

  @ApiProperty({ format: 'date-time' })
  createdAt: string;

  @ApiProperty({ format: 'date-time' })
  updatedAt: string;
}

/** A page of `GET /api/projects`, newest first. */
export class ProjectPage {
  @ApiProperty({ type: [ProjectView] })
  items: ProjectView[];

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Pass as `cursor` for the next page; null on the last one',
  })
  nextCursor: string | null;
}

type ProjectFields = Pick<
  ProjectEntity,
  'id' | 'name' | 'workspacePath' | 'maxConcurrentRuns' | 'externalProvider' | 'externalId' | 'createdAt' | 'updatedAt'
>;

export function toProjectView(p: ProjectFields): ProjectView {
  return {
    id: p.id,
    name: p.name,
    workspacePath: p.workspacePath,
    maxConcurrentRuns: p.maxConcurrentRuns,
    externalProvider: p.externalProvider,
    externalId: p.externalId,
    createdAt: new Date(p.createdAt).toISOString(),
    updatedAt: new Date(p.updatedAt).toISOString(),
  };
}
