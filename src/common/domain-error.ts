/** A domain failure with a stable code; the global filter maps it to an HTTP answer. */
export class DomainError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const notFound = (what: string, id: string) => new DomainError(404, 'Not Found', `${what} ${id} not found`);
export const conflict = (message: string, headers?: Record<string, string>) => new DomainError(409, 'Conflict', message, headers);
