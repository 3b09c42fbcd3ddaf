import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Response } from 'express';
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { DomainError } from '../common/domain-error';
import { AppError, httpStatusOf } from './error-status';

/**
 * One error shape for every answer: { statusCode, error, message }. A 4xx is the caller's
 * business and is not logged as an error; a 500 gets an id, logged with its stack, and the
 * answer carries only the id.
 */
@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpError');

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const { status, message, headers } = this.describe(exception);
    // A DomainError is a deliberate answer (e.g. 503 "not configured"): its message is safe to show.
    if (status >= 500 && !(exception instanceof DomainError)) {
      const errorId = randomUUID();
      this.logger.error({
        msg: 'unhandled error',
        errorId,
        err: exception instanceof Error ? exception.stack : String(exception),
      });
      res.status(status).json({
        statusCode: status,
        error: STATUS_CODES[status] ?? 'Error',
        message: `internal error (id ${errorId})`,
      });
      return;
    }
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.status(status).json({ statusCode: status, error: STATUS_CODES[status] ?? 'Error', message });
  }

  private describe(exception: unknown): { status: number; message: string; headers: Record<string, string> } {
    if (exception instanceof DomainError) {
      return { status: httpStatusOf(exception as AppError), message: exception.message, headers: exception.headers };
    }
    if (exception instanceof HttpException) {
      const body = exception.getResponse() as { message?: string | string[] } | string;
      const raw = typeof body === 'string' ? body : (body.message ?? exception.message);
      return { status: exception.getStatus(), message: Array.isArray(raw) ? raw.join('; ') : String(raw), headers: {} };
    }
    // body-parser errors (malformed JSON, too large) carry their own 4xx status.
    const e = exception as { status?: number; statusCode?: number; type?: string; expose?: boolean };
    const status = e?.status ?? e?.statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      const message =
        e.type === 'entity.parse.failed'
          ? 'body is not valid JSON'
          : e.type === 'entity.too.large'
            ? 'body is too large'
            : String((exception as Error).message);
      return { status, message, headers: {} };
    }
    return { status: HttpStatus.INTERNAL_SERVER_ERROR, message: 'internal error', headers: {} };
  }
}
