import { ApiPropertyOptional } from '@nestjs/swagger';
import { LimitQuery } from '../../common/limit.query';
import { IsEnum, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { DeliveryStatus } from '../webhook-delivery.entity';

export class ListDeliveriesQuery extends LimitQuery {
  @ApiPropertyOptional({ example: 'plane' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(50)
  provider?: string;

  @ApiPropertyOptional({ enum: DeliveryStatus })
  @IsOptional()
  @IsEnum(DeliveryStatus)
  status?: DeliveryStatus;
}
