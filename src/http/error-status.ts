import { HttpStatus } from '@nestjs/common';
import { RequestError, RequestErrorCode } from '../common/domain-error';
import { IdempotencyError, IdempotencyErrorCode } from '../runs/idempotency/idempotency.errors';
import { RunsError, RunsErrorCode } from '../runs/runs.errors';
import { TasksError, TasksErrorCode } from '../tasks/tasks.errors';
import { WebhooksError, WebhooksErrorCode } from '../webhooks/webhooks.errors';

/** Every domain error the HTTP layer can meet; a new module's error type is added here. */
export type AppError = RequestError | RunsError | IdempotencyError | WebhooksError | TasksError;

/** The one place where domain codes become HTTP statuses. */
export function httpStatusOf(err: AppError): number {
  switch (err.domain) {
    case 'request':
      return requestStatus(err.code);
    case 'runs':
      return runsStatus(err.code);
    case 'idempotency':
      return idempotencyStatus(err.code);
    case 'webhooks':
      return webhooksStatus(err.code);
    case 'tasks':
      return tasksStatus(err.code);
    default:
      return unreachable(err);
  }
}

function requestStatus(code: RequestErrorCode): number {
  switch (code) {
    case RequestErrorCode.INVALID_CURSOR:
      return HttpStatus.BAD_REQUEST;
    default:
      return unreachable(code);
  }
}

function runsStatus(code: RunsErrorCode): number {
  switch (code) {
    case RunsErrorCode.PROJECT_NOT_FOUND:
    case RunsErrorCode.RUN_NOT_FOUND:
      return HttpStatus.NOT_FOUND;
    case RunsErrorCode.WORKSPACE_INVALID:
    case RunsErrorCode.WORKSPACE_OVERLAPS:
      return HttpStatus.BAD_REQUEST;
    case RunsErrorCode.PROJECT_NAME_TAKEN:
    case RunsErrorCode.DISPATCH_IN_PROGRESS:
    case RunsErrorCode.RUN_NOT_DISPATCHABLE:
    case RunsErrorCode.RUN_NOT_CANCELLABLE:
      return HttpStatus.CONFLICT;
    default:
      return unreachable(code);
  }
}

function idempotencyStatus(code: IdempotencyErrorCode): number {
  switch (code) {
    case IdempotencyErrorCode.KEY_INVALID:
      return HttpStatus.BAD_REQUEST;
    case IdempotencyErrorCode.KEY_REUSED:
      return HttpStatus.UNPROCESSABLE_ENTITY;
    case IdempotencyErrorCode.IN_FLIGHT:
    case IdempotencyErrorCode.CONTENDED:
      return HttpStatus.CONFLICT;
    default:
      return unreachable(code);
  }
}

function webhooksStatus(code: WebhooksErrorCode): number {
  switch (code) {
    case WebhooksErrorCode.NOT_JSON:
    case WebhooksErrorCode.INVALID_PAYLOAD:
      return HttpStatus.BAD_REQUEST;
    case WebhooksErrorCode.BAD_SIGNATURE:
      return HttpStatus.UNAUTHORIZED;
    case WebhooksErrorCode.DELIVERY_NOT_FOUND:
      return HttpStatus.NOT_FOUND;
    case WebhooksErrorCode.REPLAY_UNSUPPORTED:
      return HttpStatus.UNPROCESSABLE_ENTITY;
    case WebhooksErrorCode.NOT_CONFIGURED:
    case WebhooksErrorCode.STORAGE_UNAVAILABLE:
      return HttpStatus.SERVICE_UNAVAILABLE;
    default:
      return unreachable(code);
  }
}

function tasksStatus(code: TasksErrorCode): number {
  switch (code) {
    case TasksErrorCode.TASK_NOT_FOUND:
      return HttpStatus.NOT_FOUND;
    default:
      return unreachable(code);
  }
}

/** Fails to compile when a domain or a code has no status; throws if one slips through at run time. */
function unreachable(value: never): never {
  throw new Error(`no HTTP status for ${JSON.stringify(value)}`);
}
