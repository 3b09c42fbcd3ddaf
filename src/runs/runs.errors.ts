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

/** What a refused dispatch says, as a value (an Error captures a stack: a twin dispatch pays for it). */
export interface RunsRefusal {
  code: RunsErrorCode;
  message: string;
}
export const DISPATCH_IN_PROGRESS: RunsRefusal = {
  code: RunsErrorCode.DISPATCH_IN_PROGRESS,
  message: 'a dispatch of this run is already in progress',
};
export const runNotFoundRefusal = (id: string): RunsRefusal => ({
  code: RunsErrorCode.RUN_NOT_FOUND,
  message: `run ${id} not found`,
});

export const projectNotFound = (id: string) =>
  new RunsError(RunsErrorCode.PROJECT_NOT_FOUND, `project ${id} not found`);
export const runNotFound = (id: string) => new RunsError(RunsErrorCode.RUN_NOT_FOUND, runNotFoundRefusal(id).message);
export const dispatchInProgress = () => new RunsError(DISPATCH_IN_PROGRESS.code, DISPATCH_IN_PROGRESS.message);
