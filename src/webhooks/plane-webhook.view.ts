import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

const STATUSES = ['accepted', 'duplicate', 'ignored'] as const;

/** The answer to Plane (contract: `POST /webhooks/plane`); 202 accepted/ignored, 200 duplicate. */
export class PlaneWebhookAnswer {
  @ApiProperty({ enum: STATUSES })
  status: (typeof STATUSES)[number];

  @ApiPropertyOptional({
    format: 'uuid',
    description: 'The recorded delivery (GET /api/webhook-deliveries); absent when spooled (no row yet)',
  })
  deliveryId?: string;

  @ApiPropertyOptional({ example: 'self_actor', description: 'Why an event was ignored (or found a duplicate)' })
  reason?: string;

  @ApiPropertyOptional({
    enum: [true],
    description:
      'Postgres was out of reach: the delivery waits in the Redis spool and is processed once when it is back',
  })
  spooled?: true;
}
