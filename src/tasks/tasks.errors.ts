import { DomainError } from '../common/domain-error';

export enum TasksErrorCode {
  TASK_NOT_FOUND = 'TASK_NOT_FOUND',
}

export class TasksError extends DomainError<TasksErrorCode> {
  readonly domain = 'tasks';
}
