import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { DomainError, notFound } from '../common/domain-error';
import { MetricsService } from '../metrics/metrics.service';
import { PLANE, PlaneEventHandler } from './plane-event-handler';
import { PlaneEvent, parsePlaneEvent, planeDedupeKey } from './plane-payload';
import { verifyPlaneSignature } from './plane-signature';
import { PlaneWebhookAnswer } from './plane-webhook.view';
import { ReplayView } from './delivery.view';
import { DeliveryOutcome, WebhookDeliveriesRepository } from './webhook-deliveries.repository';
import { DeliveryStatus } from './webhook-delivery.entity';

export interface PlaneRequest {
  rawBody: Buffer | undefined;
  body: unknown;
  signature: string | string[] | undefined;
  deliveryHeader: string | string[] | undefined;
}

export interface IntakeAnswer {
  httpStatus: 200 | 202;
  body: PlaneWebhookAnswer;
}

/**
 * POST /webhooks/plane, in this order: configured? → signature over the raw bytes → parse → ONE
 * insert keyed by the dedupe key (a retry stops here) → the event handler. Body-size (413) and
 * JSON syntax (400) are enforced by the body parser before this runs.
 */
@Injectable()
export class PlaneIntakeService {
  private readonly logger = new Logger(PlaneIntakeService.name);

  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly handler: PlaneEventHandler,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async receive(req: PlaneRequest): Promise<IntakeAnswer> {
    if (this.config.planeWebhookSecrets.length === 0) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'unconfigured' });
      throw new DomainError(503, 'Service Unavailable', 'Plane intake is not configured (set PLANE_WEBHOOK_SECRETS)');
    }
    if (!Buffer.isBuffer(req.rawBody) || req.rawBody.length === 0) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'invalid' });
      throw new DomainError(400, 'Bad Request', 'body must be JSON sent as application/json');
    }
    if (!verifyPlaneSignature(req.rawBody, req.signature, this.config.planeWebhookSecrets)) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'rejected' });
      throw new DomainError(401, 'Unauthorized', 'missing or invalid X-Plane-Signature');
    }
    let event: PlaneEvent;
    try {
      event = parsePlaneEvent(req.body);
    } catch (err) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'invalid' });
      throw err;
    }
    const body = req.body as Record<string, unknown>;
    const recorded = await this.deliveries.record({
      provider: PLANE,
      dedupeKey: planeDedupeKey(event.version, req.rawBody, body),
      externalDeliveryId: headerValue(req.deliveryHeader),
      payloadVersion: event.version,
      event: event.event,
      action: event.action,
      workItemId: event.workItemId,
      actorId: event.actorId,
      payload: body,
    });
    if (recorded.kind === 'duplicate') {
      this.metrics.duplicate('delivery_dedupe');
      this.metrics.deliveries.inc({ provider: PLANE, status: 'duplicate' });
      if (recorded.takeOver) {
        this.logger.warn({ msg: 'retry of a delivery whose processing died: processing it now', deliveryId: recorded.id });
        await this.handler.handle(recorded.id, event);
      }
      return { httpStatus: 200, body: { status: 'duplicate', deliveryId: recorded.id } };
    }
    return answer(recorded.id, await this.handler.handle(recorded.id, event));
  }

  /** Re-runs a stored delivery through the same idempotent path (the signature was checked on arrival). */
  async replay(id: string): Promise<ReplayView> {
    const row = await this.deliveries.get(id);
    if (!row) throw notFound('webhook delivery', id);
    if (row.provider !== PLANE) throw new DomainError(422, 'Unprocessable Entity', `no replay for provider ${row.provider}`);
    const outcome = await this.handler.handle(row.id, parsePlaneEvent(row.payload));
    return { deliveryId: row.id, ...outcome };
  }
}

function answer(deliveryId: string, o: DeliveryOutcome): IntakeAnswer {
  switch (o.status) {
    case DeliveryStatus.IGNORED:
      return { httpStatus: 202, body: { status: 'ignored', deliveryId, reason: o.reason ?? undefined } };
    case DeliveryStatus.DUPLICATE:
      return { httpStatus: 200, body: { status: 'duplicate', deliveryId, reason: o.reason ?? undefined } };
    default:
      // processed, and failed too: a failure is stored for replay, and a 5xx would make Plane drop it.
      return { httpStatus: 202, body: { status: 'accepted', deliveryId } };
  }
}

/** The sender's per-attempt id, for the record only; never trusted for dedupe. */
function headerValue(v: string | string[] | undefined): string | null {
  const s = Array.isArray(v) ? v[0] : v;
  return s ? s.slice(0, 200) : null;
}
