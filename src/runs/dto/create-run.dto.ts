import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';

export class CreateRunDto {
  @ApiProperty({ example: 'Add a health endpoint', maxLength: 100000 })
  @Transform(({ value }) => (typeof value === 'string' && value.trim() === '' ? '' : value))
  @IsString()
  @IsNotEmpty()
  @MaxLength(100_000)
  requirement: string;

  @ApiPropertyOptional({ default: false, description: 'Queue the run at once (status QUEUED)' })
  @IsOptional()
  @IsBoolean()
  dispatch?: boolean;
}
