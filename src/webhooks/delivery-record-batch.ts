import { Injectable } from '@nestjs/common';
import { Batcher } from '../common/batcher';
import { isDbUnavailableError } from '../database/pg-errors';
import { MetricsService } from '../metrics/metrics.service';
import { NewDelivery, RecordResult, WebhookDeliveriesRepository } from './webhook-deliveries.repository';

/** Most deliveries in one statement. */
const DELIVERY_BATCH_MAX = 64;

/**
 * Group commit of the intake's first statement: the deliveries a process receives in the same turn
 * of its event loop (under load, several new ones per turn) are recorded by ONE statement, each
 * caller answered with its own row, new or a retry's bump, as its own statement would have
 * answered. A dedupe key at most once per statement (a second one waits for the next). A lost
 * connection fails every caller of the batch (each spools its delivery, as before); any other
 * error is sent again delivery by delivery, so a bad row fails only its caller.
 */
@Injectable()
export class DeliveryRecordBatch {
  private readonly batcher: Batcher<NewDelivery, RecordResult>;

  constructor(deliveries: WebhookDeliveriesRepository, metrics: MetricsService) {
    this.batcher = new Batcher((ds) => deliveries.recordMany(ds), {
      maxSize: DELIVERY_BATCH_MAX,
      key: (d) => d.dedupeKey,
      isolate: (err) => !isDbUnavailableError(err),
      onBatch: (size) => metrics.deliveryBatchSize.observe(size),
    });
  }

  record(d: NewDelivery): Promise<RecordResult> {
    return this.batcher.submit(d);
  }
}
