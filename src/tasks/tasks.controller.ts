import { Controller, Get, Param, ParseUUIDPipe, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiNotFoundResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard } from '../common/api-key.guard';
import { ListTasksQuery } from './dto/list-tasks.query';
import { TasksService } from './tasks.service';
import { TaskView } from './task.view';

@ApiTags('tasks')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('api/tasks')
export class TasksController {
  constructor(private readonly tasks: TasksService) {}

  @Get()
  @ApiOkResponse({ description: '{ items }: tasks with their external reference and authoring run id, newest first' })
  list(@Query() q: ListTasksQuery): Promise<{ items: TaskView[] }> {
    return this.tasks.list({ provider: q.provider, externalId: q.externalId, limit: q.limit ?? 50 });
  }

  @Get(':id')
  @ApiOkResponse({ description: 'The task with its external reference and authoring run id' })
  @ApiNotFoundResponse({ description: 'No such task' })
  get(@Param('id', ParseUUIDPipe) id: string): Promise<TaskView> {
    return this.tasks.get(id);
  }
}
