import { Injectable } from '@nestjs/common';
import { TasksError, TasksErrorCode } from './tasks.errors';
import { TaskList, TaskView, toTaskView } from './task.view';
import { TasksRepository } from './tasks.repository';

/** Reads tasks for the API. Creation and closing go through TaskIntakeService. */
@Injectable()
export class TasksService {
  constructor(private readonly tasks: TasksRepository) {}

  async list(q: { provider?: string; externalId?: string; limit: number }): Promise<TaskList> {
    return { items: (await this.tasks.list(q)).map(toTaskView) };
  }

  async get(id: string): Promise<TaskView> {
    const row = await this.tasks.findById(id);
    if (!row) throw new TasksError(TasksErrorCode.TASK_NOT_FOUND, `task ${id} not found`);
    return toTaskView(row);
  }
}
