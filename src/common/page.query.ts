import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, MaxLength } from 'class-validator';
import { LimitQuery } from './limit.query';

/** `limit` and `cursor` of the paginated list routes (`{ items, nextCursor }`). */
export class PageQuery extends LimitQuery {
  @ApiPropertyOptional({ description: 'nextCursor of the previous page' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  cursor?: string;
}
