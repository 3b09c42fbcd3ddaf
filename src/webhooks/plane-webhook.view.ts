import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

const STATUSES = ['accepted', 'duplicate', 'ignored'] as const;

/** The answer to Plane (contract: `POST /webhooks/plane`); 202 accepted/ignored, 200 duplicate. */
export class PlaneWebhookAnswer {
  @ApiProperty({ enum: STATUSES })
  status: (typeof STATUSES)[number];

  @ApiProperty({ format: 'uuid', description: 'The recorded delivery (GET /api/webhook-deliveries)' })
  deliveryId: string;

  @ApiPropertyOptional({ example: 'self_actor', description: 'Why an event was ignored (or found a duplicate)' })
  reason?: string;
}
