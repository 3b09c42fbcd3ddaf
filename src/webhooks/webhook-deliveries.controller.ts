import { Controller, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequireApiKey } from '../common/api-key.guard';
import { ApiErrors } from '../common/openapi';
import { DeliveryList, ReplayView, toDeliveryView } from './delivery.view';
import { ListDeliveriesQuery } from './dto/list-deliveries.query';
import { PlaneIntakeService } from './plane-intake.service';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';

@ApiTags('webhooks')
@RequireApiKey()
@Controller('api/webhook-deliveries')
export class WebhookDeliveriesController {
  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly intake: PlaneIntakeService,
  ) {}

  @Get()
  @ApiOperation({ summary: 'List recorded webhook deliveries, newest first' })
  @ApiOkResponse({ description: 'Recorded deliveries (without their payload)', type: DeliveryList })
  @ApiErrors({ 400: 'Invalid provider, status or limit' })
  async list(@Query() q: ListDeliveriesQuery): Promise<DeliveryList> {
    const rows = await this.deliveries.list({ provider: q.provider, status: q.status, limit: q.limit ?? 50 });
    return { items: rows.map(toDeliveryView) };
  }

  @Post(':id/replay')
  @HttpCode(202)
  @ApiOperation({ summary: 'Process a stored delivery again, through the same idempotent path' })
  @ApiAcceptedResponse({ description: 'What the replay concluded', type: ReplayView })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such delivery', 422: 'No replay for this provider' })
  replay(@Param('id', ParseUUIDPipe) id: string): Promise<ReplayView> {
    return this.intake.replay(id);
  }
}
