import { DomainError } from '../../common/domain-error';

export enum IdempotencyErrorCode {
  KEY_INVALID = 'KEY_INVALID',
  KEY_REUSED = 'KEY_REUSED',
  IN_FLIGHT = 'IN_FLIGHT',
  CONTENDED = 'CONTENDED',
}

export class IdempotencyError extends DomainError<IdempotencyErrorCode> {
  readonly domain = 'idempotency';
}
