/**
 * A failure in a module's own words: a code from the module's enum and a message that is safe to
 * show. Services never pick HTTP statuses; src/http/error-status.ts maps every code to one.
 */
export abstract class DomainError<C extends string = string> extends Error {
  abstract readonly domain: string;

  constructor(
    readonly code: C,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** Problems with the shape of a request that any module's routes share. */
export enum RequestErrorCode {
  INVALID_CURSOR = 'INVALID_CURSOR',
}

export class RequestError extends DomainError<RequestErrorCode> {
  readonly domain = 'request';
}
