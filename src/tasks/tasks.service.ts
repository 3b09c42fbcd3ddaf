import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { TasksError, TasksErrorCode } from './tasks.errors';
import { TASK_SELECT, TaskList, TaskRow, TaskView, toTaskView } from './task.view';

/** Reads tasks for the API. Creation and closing go through TaskIntakeService. */
@Injectable()
export class TasksService {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  async list(q: { provider?: string; externalId?: string; limit: number }): Promise<TaskList> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (q.provider) where.push(`t.external_provider = $${params.push(q.provider)}`);
    if (q.externalId) where.push(`t.external_id = $${params.push(q.externalId)}`);
    const rows: TaskRow[] = await this.ds.query(
      `${TASK_SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY t.created_at DESC, t.id DESC LIMIT $${params.push(q.limit)}`,
      params,
    );
    return { items: rows.map(toTaskView) };
  }

  async get(id: string): Promise<TaskView> {
    const rows: TaskRow[] = await this.ds.query(`${TASK_SELECT} WHERE t.id = $1`, [id]);
    if (!rows[0]) throw new TasksError(TasksErrorCode.TASK_NOT_FOUND, `task ${id} not found`);
    return toTaskView(rows[0]);
  }
}
