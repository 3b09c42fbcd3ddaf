import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsNotEmpty, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

const trim = ({ value }: { value: unknown }) => (typeof value === 'string' ? value.trim() : value);

export class CreateProjectDto {
  @ApiProperty({ example: 'checkout-service', maxLength: 200 })
  @Transform(trim)
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  name: string;

  @ApiPropertyOptional({ description: 'Absolute workspace path; default <WORKSPACE_ROOT>/<project id>' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(1000)
  workspacePath?: string;

  @ApiPropertyOptional({ default: 1, minimum: 1, maximum: 10000, description: 'Cap on RUNNING runs of the project' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10000)
  maxConcurrentRuns?: number;
}
