import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsNotEmpty, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';

const trim = ({ value }: { value: unknown }) => (typeof value === 'string' ? value.trim() : value);

export class CreateProjectDto {
  @ApiProperty({ example: 'checkout-service', maxLength: 200 })
  @Transform(trim)
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  name: string;

  @ApiPropertyOptional({
    description:
      'Absolute path of a directory inside WORKSPACE_ROOT (symlinks resolved) that no other project uses; default <WORKSPACE_ROOT>/<project id>. 400 otherwise.',
  })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(1000)
  // Absolute: a relative path would depend on the server's working directory. No NUL: no path holds one.
  @Matches(/^\/[^\0]*$/, { message: 'workspacePath must be an absolute path (and hold no NUL character)' })
  workspacePath?: string;

  @ApiPropertyOptional({ default: 1, minimum: 1, maximum: 10000, description: 'Cap on RUNNING runs of the project' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10000)
  maxConcurrentRuns?: number;
}
