import { Controller, Get, HttpCode, Param, ParseUUIDPipe, Post, Query, UseGuards } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBearerAuth, ApiNotFoundResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard } from '../common/api-key.guard';
import { DeliveryView, toDeliveryView } from './delivery.view';
import { ListDeliveriesQuery } from './dto/list-deliveries.query';
import { PlaneIntakeService, ReplayAnswer } from './plane-intake.service';
import { WebhookDeliveriesRepository } from './webhook-deliveries.repository';

@ApiTags('webhooks')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('api/webhook-deliveries')
export class WebhookDeliveriesController {
  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly intake: PlaneIntakeService,
  ) {}

  @Get()
  @ApiOkResponse({ description: '{ items }: recorded deliveries, newest first' })
  async list(@Query() q: ListDeliveriesQuery): Promise<{ items: DeliveryView[] }> {
    const rows = await this.deliveries.list({ provider: q.provider, status: q.status, limit: q.limit ?? 50 });
    return { items: rows.map(toDeliveryView) };
  }

  @Post(':id/replay')
  @HttpCode(202)
  @ApiAcceptedResponse({ description: '{ deliveryId, status, reason, taskId, runId, error }: what the replay concluded' })
  @ApiNotFoundResponse({ description: 'No such delivery' })
  replay(@Param('id', ParseUUIDPipe) id: string): Promise<ReplayAnswer> {
    return this.intake.replay(id);
  }
}
