import { DomainError } from '../common/domain-error';

export enum RunsErrorCode {
  PROJECT_NOT_FOUND = 'PROJECT_NOT_FOUND',
  PROJECT_NAME_TAKEN = 'PROJECT_NAME_TAKEN',
  WORKSPACE_INVALID = 'WORKSPACE_INVALID',
  WORKSPACE_OVERLAPS = 'WORKSPACE_OVERLAPS',
  RUN_NOT_FOUND = 'RUN_NOT_FOUND',
  DISPATCH_IN_PROGRESS = 'DISPATCH_IN_PROGRESS',
  RUN_NOT_DISPATCHABLE = 'RUN_NOT_DISPATCHABLE',
  RUN_NOT_CANCELLABLE = 'RUN_NOT_CANCELLABLE',
}

export class RunsError extends DomainError<RunsErrorCode> {
  readonly domain = 'runs';
}

export const projectNotFound = (id: string) =>
  new RunsError(RunsErrorCode.PROJECT_NOT_FOUND, `project ${id} not found`);
export const runNotFound = (id: string) => new RunsError(RunsErrorCode.RUN_NOT_FOUND, `run ${id} not found`);
export const dispatchInProgress = () =>
  new RunsError(RunsErrorCode.DISPATCH_IN_PROGRESS, 'a dispatch of this run is already in progress');
