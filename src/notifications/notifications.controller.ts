import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequireApiKey } from '../common/api-key.guard';
import { ApiErrors } from '../common/openapi';
import { ListNotificationsQuery } from './dto/list-notifications.query';
import { NotificationList } from './notification.view';
import { NotificationsService } from './notifications.service';

@ApiTags('notifications')
@RequireApiKey()
@Controller('api/notifications')
export class NotificationsController {
  constructor(private readonly notifications: NotificationsService) {}

  @Get()
  @ApiOperation({ summary: "List a run's notifications, oldest first" })
  @ApiOkResponse({ description: 'The outbox rows of the run', type: NotificationList })
  @ApiErrors({ 400: 'runId missing or not a UUID' })
  list(@Query() q: ListNotificationsQuery): Promise<NotificationList> {
    return this.notifications.listForRun(q.runId);
  }
}
