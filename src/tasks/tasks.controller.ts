import { Controller, Get, Param, ParseUUIDPipe, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequireApiKey } from '../common/api-key.guard';
import { ApiErrors } from '../common/openapi';
import { ListTasksQuery } from './dto/list-tasks.query';
import { TasksService } from './tasks.service';
import { TaskList, TaskView } from './task.view';

@ApiTags('tasks')
@RequireApiKey()
@Controller('api/tasks')
export class TasksController {
  constructor(private readonly tasks: TasksService) {}

  @Get()
  @ApiOperation({ summary: 'List tasks, newest first (filter by external reference)' })
  @ApiOkResponse({ description: 'Tasks with their external reference and authoring run id', type: TaskList })
  @ApiErrors({ 400: 'Invalid provider, externalId or limit' })
  list(@Query() q: ListTasksQuery): Promise<TaskList> {
    return this.tasks.list({ provider: q.provider, externalId: q.externalId, limit: q.limit ?? 50 });
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get a task' })
  @ApiOkResponse({ description: 'The task with its external reference and authoring run id', type: TaskView })
  @ApiErrors({ 400: 'The id is not a UUID', 404: 'No such task' })
  get(@Param('id', ParseUUIDPipe) id: string): Promise<TaskView> {
    return this.tasks.get(id);
  }
}
