import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { WebhooksError, WebhooksErrorCode } from './webhooks.errors';
import { isDbUnavailableError } from '../database/pg-errors';
import { MetricsService } from '../metrics/metrics.service';
import { deliveryRow, PlaneDelivery, readPlaneDelivery, UNSTORABLE_REASONS } from './plane-delivery';
import { PLANE, PlaneEventHandler } from './plane-event-handler';
import { parsePlaneEvent, planeContentKey, planeDedupeKeyOf } from './plane-payload';
import { verifyPlaneSignature } from './plane-signature';
import { PlaneWebhookAnswer } from './plane-webhook.view';
import { ReplayView } from './delivery.view';
import { PlaneSpool, SpoolEntry } from './plane-spool';
import { SettledDeliveries } from './settled-deliveries';
import { DeliveryRecordBatch } from './delivery-record-batch';
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

/** What became of a spooled entry: done (remove it), or Postgres is still away (keep it, back off). */
export type SpooledResult = 'done' | 'unavailable';

const SPOOLED: IntakeAnswer = { httpStatus: 202, body: { status: 'accepted', spooled: true } };

/**
 * POST /webhooks/plane, in this order: configured? → signature over the raw bytes → parse → a
 * retry of a delivery this process settled or is processing stops here (SettledDeliveries) → ONE
 * insert keyed by the dedupe key, shared with the other deliveries of the same turn
 * (DeliveryRecordBatch; any other retry stops here) → (entries of this work item in the spool?
 * queue behind them) → the event handler. Body size (413), JSON syntax and nesting (400) are
 * enforced by the body parser before this runs. Postgres out of reach at the insert or in the
 * handler: the delivery goes to the spool (202 spooled), drained later through processSpooled.
 */
@Injectable()
export class PlaneIntakeService {
  private readonly logger = new Logger(PlaneIntakeService.name);

  constructor(
    private readonly deliveries: WebhookDeliveriesRepository,
    private readonly recordBatch: DeliveryRecordBatch,
    private readonly handler: PlaneEventHandler,
    private readonly spool: PlaneSpool,
    private readonly settled: SettledDeliveries,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async receive(req: PlaneRequest): Promise<IntakeAnswer> {
    if (this.config.plane.webhookSecrets.length === 0) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'unconfigured' });
      throw new WebhooksError(
        WebhooksErrorCode.NOT_CONFIGURED,
        'Plane intake is not configured (set PLANE_WEBHOOK_SECRETS)',
      );
    }
    const rawBody = req.rawBody;
    if (!Buffer.isBuffer(rawBody) || rawBody.length === 0) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'invalid' });
      throw new WebhooksError(WebhooksErrorCode.NOT_JSON, 'body must be JSON sent as application/json');
    }
    if (!verifyPlaneSignature(rawBody, req.signature, this.config.plane.webhookSecrets)) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'rejected' });
      throw new WebhooksError(WebhooksErrorCode.BAD_SIGNATURE, 'missing or invalid X-Plane-Signature');
    }
    // A byte-identical retry of a delivery this process saw settle (what Plane sends): answered from
    // memory before the body is read, its count folded in later. Those bytes were read once already.
    const contentKey = planeContentKey(rawBody);
    const settled = this.settled.repeat(contentKey);
    if (settled) return this.repeatAnswer(settled);
    let delivery: PlaneDelivery;
    try {
      delivery = readPlaneDelivery(req.body, (e) => planeDedupeKeyOf(e, contentKey), headerValue(req.deliveryHeader));
    } catch (err) {
      this.metrics.deliveries.inc({ provider: PLANE, status: 'invalid' });
      throw err;
    }
    // Another body with a settled event id (v2), or a retry of a delivery still being worked on.
    const repeated =
      (delivery.dedupeKey !== contentKey ? this.settled.repeat(delivery.dedupeKey) : undefined) ??
      (await this.settled.inProgressRepeat(delivery.dedupeKey));
    if (repeated) return this.repeatAnswer(repeated);
    const progress = this.settled.begin(delivery.dedupeKey);
    try {
      return await this.recordAndHandle(req.body, delivery, contentKey, progress.recorded);
    } finally {
      progress.done();
    }
  }

  private repeatAnswer(deliveryId: string): IntakeAnswer {
    this.metrics.duplicate('delivery_dedupe');
    this.metrics.deliveries.inc({ provider: PLANE, status: 'duplicate' });
    return { httpStatus: 200, body: { status: 'duplicate', deliveryId } };
  }

  /** A delivery no memory of this process answers: its row (insert or retry), then its processing. */
  private async recordAndHandle(
    body: unknown,
    delivery: PlaneDelivery,
    contentKey: string,
    recordedAs: (id: string) => void,
  ): Promise<IntakeAnswer> {
    const settle = (id: string, status: DeliveryStatus) =>
      this.settled.settle(delivery.dedupeKey, id, status, contentKey);
    // Asked now, beside the insert, not after it: a new delivery pays one round trip less. It
    // never rejects (Redis away: false), and only a new delivery reads the answer.
    const spooledBefore = this.spool.holdsWorkItem(delivery.event.workItemId);
    let recorded;
    try {
      recorded = await this.recordBatch.record(deliveryRow(delivery));
    } catch (err) {
      if (!isDbUnavailableError(err)) throw err;
      return this.toSpool(body, delivery, null, String(err));
    }
    recordedAs(recorded.id);
    if (recorded.kind === 'duplicate') {
      this.metrics.duplicate('delivery_dedupe');
      this.metrics.deliveries.inc({ provider: PLANE, status: 'duplicate' });
      if (recorded.takeOver) {
        this.logger.warn({
          msg: 'retry of a delivery whose processing died: processing it now',
          deliveryId: recorded.id,
        });
        const outcome = await this.handler.handle(recorded.id, delivery.event);
        if (!outcome.transient) settle(recorded.id, outcome.status);
      } else settle(recorded.id, recorded.status);
      return { httpStatus: 200, body: { status: 'duplicate', deliveryId: recorded.id } };
    }
    // Arrival order per work item: while older deliveries of this item wait in the spool, this one
    // is processed behind them, from its row (only a new delivery asks: a retry changes nothing).
    if (await spooledBefore) {
      const spooled = await this.toSpool(body, delivery, recorded.id, 'behind_spooled').catch(() => null);
      if (spooled) return spooled;
    }
    const outcome = await this.handler.handle(recorded.id, delivery.event);
    if (outcome.transient) {
      // Stored, so never a 5xx: spooled if Redis takes it, else left for a replay (status failed or accepted).
      return this.toSpool(body, delivery, recorded.id, outcome.error ?? 'processing failed').catch(() =>
        answer(recorded.id, outcome),
      );
    }
    settle(recorded.id, outcome.status);
    return answer(recorded.id, outcome);
  }

  /**
   * A spooled delivery, through the same idempotent path as a direct one. The row may already
   * exist: written by this entry's own first pass (deliveryId), by a drainer that died mid-entry,
   * or by a live retry. Then it is processed again only while it has not reached an outcome
   * (accepted, or failed); a processed, duplicate or ignored row only counts the retry.
   */
  async processSpooled(entry: SpoolEntry): Promise<SpooledResult> {
    const delivery = readPlaneDelivery(JSON.parse(entry.body), () => entry.dedupeKey, entry.externalDeliveryId);
    let id: string;
    let owed: boolean;
    try {
      if (entry.deliveryId) {
        const row = await this.deliveries.get(entry.deliveryId);
        if (!row) throw new Error(`spooled delivery ${entry.deliveryId} has no row`);
        [id, owed] = [row.id, isOwed(row.status)];
      } else {
        const recorded = await this.deliveries.record(deliveryRow(delivery));
        [id, owed] = [recorded.id, recorded.kind === 'new' || isOwed(recorded.status)];
        if (recorded.kind === 'duplicate' && !owed) {
          this.metrics.duplicate('delivery_dedupe');
          this.metrics.deliveries.inc({ provider: PLANE, status: 'duplicate' });
        }
      }
    } catch (err) {
      if (isDbUnavailableError(err)) return 'unavailable';
      throw err;
    }
    if (owed && (await this.handler.handle(id, delivery.event)).transient) return 'unavailable';
    return 'done';
  }

  /** Re-runs a stored delivery through the same idempotent path (the signature was checked on arrival). */
  async replay(id: string): Promise<ReplayView> {
    const row = await this.deliveries.get(id);
    if (!row) throw new WebhooksError(WebhooksErrorCode.DELIVERY_NOT_FOUND, `webhook delivery ${id} not found`);
    if (row.provider !== PLANE)
      throw new WebhooksError(WebhooksErrorCode.REPLAY_UNSUPPORTED, `no replay for provider ${row.provider}`);
    // The stored payload of an unstorable body is a cleaned copy: it stays ignored, never a task.
    const ignore = row.reason !== null && UNSTORABLE_REASONS.has(row.reason) ? row.reason : undefined;
    const { transient: _transient, ...outcome } = await this.handler.handle(
      row.id,
      parsePlaneEvent(row.payload, ignore),
    );
    return { deliveryId: row.id, ...outcome };
  }

  private async toSpool(
    body: unknown,
    d: PlaneDelivery,
    deliveryId: string | null,
    why: string,
  ): Promise<IntakeAnswer> {
    try {
      const entry = await this.spool.push({
        dedupeKey: d.dedupeKey,
        workItemId: d.event.workItemId,
        externalDeliveryId: d.externalDeliveryId,
        deliveryId,
        body: JSON.stringify(body),
      });
      this.logger.warn({
        msg: 'plane delivery spooled; processed when Postgres is back',
        spoolId: entry.id,
        deliveryId,
        workItemId: d.event.workItemId,
        why,
      });
      return SPOOLED;
    } catch (err) {
      this.metrics.spool.inc({ provider: PLANE, outcome: 'refused' });
      this.logger.error({
        msg: 'plane delivery could not be spooled either',
        deliveryId,
        workItemId: d.event.workItemId,
        why,
        err: String(err),
      });
      throw new WebhooksError(
        WebhooksErrorCode.STORAGE_UNAVAILABLE,
        'Postgres and the delivery spool are both unavailable; the delivery was not stored',
      );
    }
  }
}

/** A row that has not reached an outcome yet: its processing is still owed. */
function isOwed(status: DeliveryStatus): boolean {
  return status === DeliveryStatus.ACCEPTED || status === DeliveryStatus.FAILED;
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
