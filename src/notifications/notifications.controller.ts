import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { ApiBadRequestResponse, ApiBearerAuth, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard } from '../common/api-key.guard';
import { ListNotificationsQuery } from './dto/list-notifications.query';
import { NotificationsService, NotificationView } from './notifications.service';

@ApiTags('notifications')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('api/notifications')
export class NotificationsController {
  constructor(private readonly notifications: NotificationsService) {}

  @Get()
  @ApiOkResponse({ description: '{ items: [{ runId, eventType, channel, status, attempts, sentAt }] }, oldest first' })
  @ApiBadRequestResponse({ description: 'runId missing or not a UUID' })
  list(@Query() q: ListNotificationsQuery): Promise<{ items: NotificationView[] }> {
    return this.notifications.listForRun(q.runId);
  }
}
