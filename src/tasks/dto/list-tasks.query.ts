import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

export class ListTasksQuery {
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

  @ApiPropertyOptional({ default: 50, minimum: 1, maximum: 200 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(200)
  limit?: number;
}
