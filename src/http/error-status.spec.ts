import { RequestError, RequestErrorCode } from '../common/domain-error';
import { IdempotencyError, IdempotencyErrorCode } from '../runs/idempotency/idempotency.errors';
import { RunsError, RunsErrorCode } from '../runs/runs.errors';
import { TasksError, TasksErrorCode } from '../tasks/tasks.errors';
import { WebhooksError, WebhooksErrorCode } from '../webhooks/webhooks.errors';
import { AppError, httpStatusOf } from './error-status';

// The contract's statuses (docs/contract.md); the e2e tests pin them again over HTTP.
const expected: Array<[AppError, number]> = [
  [new RequestError(RequestErrorCode.INVALID_CURSOR, ''), 400],
  [new RunsError(RunsErrorCode.PROJECT_NOT_FOUND, ''), 404],
  [new RunsError(RunsErrorCode.RUN_NOT_FOUND, ''), 404],
  [new RunsError(RunsErrorCode.PROJECT_NAME_TAKEN, ''), 409],
  [new RunsError(RunsErrorCode.WORKSPACE_INVALID, ''), 400],
  [new RunsError(RunsErrorCode.WORKSPACE_OVERLAPS, ''), 400],
  [new RunsError(RunsErrorCode.DISPATCH_IN_PROGRESS, ''), 409],
  [new RunsError(RunsErrorCode.RUN_NOT_DISPATCHABLE, ''), 409],
  [new RunsError(RunsErrorCode.RUN_NOT_CANCELLABLE, ''), 409],
  [new IdempotencyError(IdempotencyErrorCode.KEY_INVALID, ''), 400],
  [new IdempotencyError(IdempotencyErrorCode.KEY_REUSED, ''), 422],
  [new IdempotencyError(IdempotencyErrorCode.IN_FLIGHT, ''), 409],
  [new IdempotencyError(IdempotencyErrorCode.CONTENDED, ''), 409],
  [new WebhooksError(WebhooksErrorCode.NOT_CONFIGURED, ''), 503],
  [new WebhooksError(WebhooksErrorCode.NOT_JSON, ''), 400],
  [new WebhooksError(WebhooksErrorCode.BAD_SIGNATURE, ''), 401],
  [new WebhooksError(WebhooksErrorCode.INVALID_PAYLOAD, ''), 400],
  [new WebhooksError(WebhooksErrorCode.DELIVERY_NOT_FOUND, ''), 404],
  [new WebhooksError(WebhooksErrorCode.REPLAY_UNSUPPORTED, ''), 422],
  [new WebhooksError(WebhooksErrorCode.STORAGE_UNAVAILABLE, ''), 503],
  [new TasksError(TasksErrorCode.TASK_NOT_FOUND, ''), 404],
];

describe('httpStatusOf', () => {
  it.each(expected.map(([err, status]) => [`${err.domain}.${err.code}`, err, status] as const))(
    '%s → %i',
    (_, err, status) => {
      expect(httpStatusOf(err)).toBe(status);
    },
  );

  it('covers every code of every module', () => {
    const all = [RequestErrorCode, RunsErrorCode, IdempotencyErrorCode, WebhooksErrorCode, TasksErrorCode].flatMap(
      (e) => Object.values(e),
    );
    expect(expected.map(([err]) => err.code).sort()).toEqual([...all].sort());
  });

  it('throws on a code it does not know rather than answering a guess', () => {
    expect(() => httpStatusOf(new RunsError('NOPE' as RunsErrorCode, ''))).toThrow('no HTTP status for "NOPE"');
  });
});
