import { ApiPropertyOptional } from '@nestjs/swagger';
import { LimitQuery } from '../../common/limit.query';
import { IsEnum, IsOptional, IsString, IsUUID, MaxLength } from 'class-validator';
import { RunStatus } from '../run-status';

export class ListRunsQuery extends LimitQuery {
  @ApiPropertyOptional({ format: 'uuid' })
  @IsOptional()
  @IsUUID()
  projectId?: string;

  @ApiPropertyOptional({ enum: RunStatus })
  @IsOptional()
  @IsEnum(RunStatus)
  status?: RunStatus;

  @ApiPropertyOptional({ description: 'nextCursor of the previous page' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  cursor?: string;
}
