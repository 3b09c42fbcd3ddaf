import { ApiProperty } from '@nestjs/swagger';
import { IsUUID } from 'class-validator';

export class ListNotificationsQuery {
  @ApiProperty({ format: 'uuid', description: 'The run whose notifications to list' })
  @IsUUID()
  runId: string;
}
