import { DomainError } from '../common/domain-error';

export enum WebhooksErrorCode {
  NOT_CONFIGURED = 'NOT_CONFIGURED',
  NOT_JSON = 'NOT_JSON',
  BAD_SIGNATURE = 'BAD_SIGNATURE',
  INVALID_PAYLOAD = 'INVALID_PAYLOAD',
  DELIVERY_NOT_FOUND = 'DELIVERY_NOT_FOUND',
  REPLAY_UNSUPPORTED = 'REPLAY_UNSUPPORTED',
  STORAGE_UNAVAILABLE = 'STORAGE_UNAVAILABLE',
}

export class WebhooksError extends DomainError<WebhooksErrorCode> {
  readonly domain = 'webhooks';
}

export const invalidPayload = (message: string) => new WebhooksError(WebhooksErrorCode.INVALID_PAYLOAD, message);
