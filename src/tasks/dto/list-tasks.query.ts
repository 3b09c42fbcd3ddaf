import { ApiPropertyOptional } from '@nestjs/swagger';
import { LimitQuery } from '../../common/limit.query';
import { IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';

export class ListTasksQuery extends LimitQuery {
  @ApiPropertyOptional({ example: 'plane', description: 'External provider of the task' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(50)
  provider?: string;

  @ApiPropertyOptional({ description: 'External id (for Plane: the work item id)' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  externalId?: string;
}
