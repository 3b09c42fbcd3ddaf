import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Where a duplicate was stopped; label values of onceflow_duplicates_suppressed_total. */
export type DuplicateGuard =
  | 'producer_guard'
  | 'job_id'
  | 'run_lock'
  | 'claim'
  | 'fence'
  | 'delivery_dedupe'
  | 'business_key'
  | 'self_actor'
  | 'idempotency_key';

/**
 * One registry per application instance (two Nest apps in one test process must not share
 * counters). Every metric is declared here so names stay consistent.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  /** Requests per batch of a group commit: buckets by powers of two up to the batch's cap. */
  private batchSize(name: string, help: string, max: 64 | 100): Histogram {
    const buckets = [1, 2, 4, 8, 16, 32, 64, ...(max > 64 ? [max] : [])];
    return new Histogram({ name, help, buckets, registers: [this.registry] });
  }

  readonly duplicatesSuppressed = new Counter({
    name: 'onceflow_duplicates_suppressed_total',
    help: 'Duplicates stopped, by the guard that stopped them',
    labelNames: ['guard'] as const,
    registers: [this.registry],
  });
  readonly lockAcquisitions = new Counter({
    name: 'onceflow_lock_acquisitions_total',
    help: 'Run/task lock acquisition attempts by result',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly lockLosses = new Counter({
    name: 'onceflow_lock_losses_total',
    help: 'Locks lost while held (extend failed, late or check failed)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly runTransitions = new Counter({
    name: 'onceflow_run_transitions_total',
    help: 'Run status transitions by target status',
    labelNames: ['to'] as const,
    registers: [this.registry],
  });
  readonly finalizeBatchSize = this.batchSize(
    'onceflow_finalize_batch_size',
    'Finalizes written by one statement (group commit of the finalizes a worker makes at once)',
    64,
  );
  readonly claimBatchSize = this.batchSize(
    'onceflow_claim_batch_size',
    'Claims made by one round trip (group commit of the claims a worker makes at once)',
    64,
  );
  readonly dispatchBatchSize = this.batchSize(
    'onceflow_dispatch_batch_size',
    'Single dispatches sent as one bulk dispatch (group commit of the dispatches a process makes at once)',
    100,
  );
  readonly deliveryBatchSize = this.batchSize(
    'onceflow_delivery_batch_size',
    'New webhook deliveries recorded by one statement (group commit of the deliveries a process receives at once)',
    64,
  );
  readonly enqueueBatchSize = this.batchSize(
    'onceflow_enqueue_batch_size',
    'Jobs of committed QUEUED runs added by one Bull addBulk (the adds a process makes at once)',
    100,
  );
  readonly runDuration = new Histogram({
    name: 'onceflow_run_duration_seconds',
    help: 'Duration of one run attempt (command execution)',
    labelNames: ['outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600],
    registers: [this.registry],
  });
  readonly runsByStatus = new Gauge({
    name: 'onceflow_runs',
    help: 'Runs by status (refreshed by the scheduler)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'onceflow_queue_jobs',
    help: 'Bull jobs by queue and state (refreshed by the scheduler)',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
  });
  readonly notifications = new Counter({
    name: 'onceflow_notifications_total',
    help: 'Notification delivery outcomes (sent, failed, retried, skipped)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly infraRetries = new Counter({
    name: 'onceflow_infra_retries_total',
    help: 'Jobs retried with exponential backoff after an infrastructure error, by queue and reason (postgres, redis, error)',
    labelNames: ['queue', 'reason'] as const,
    registers: [this.registry],
  });
  readonly deliveries = new Counter({
    name: 'onceflow_webhook_deliveries_total',
    help: 'Webhook deliveries by provider and status',
    labelNames: ['provider', 'status'] as const,
    registers: [this.registry],
  });

  readonly steps = new Counter({
    name: 'onceflow_steps_total',
    help: 'onceflow step calls of run commands: executed, replayed (DONE before), refused (attempt no longer holds the run)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly llmCache = new Counter({
    name: 'onceflow_llm_cache_requests_total',
    help: 'Requests through the LLM proxy by cache result (hit, miss, coalesced)',
    labelNames: ['provider', 'result'] as const,
    registers: [this.registry],
  });
  readonly llmUpstreamCalls = new Counter({
    name: 'onceflow_llm_upstream_calls_total',
    help: 'Calls the LLM proxy made to an upstream provider, by status class (2xx, 4xx, 5xx, error)',
    labelNames: ['provider', 'status'] as const,
    registers: [this.registry],
  });
  readonly spool = new Counter({
    name: 'onceflow_webhook_spool_total',
    help: 'Webhook deliveries spooled in Redis while Postgres was unreachable, drained, dead-lettered or refused (spool unavailable: 503)',
    labelNames: ['provider', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly spoolDepth = new Gauge({
    name: 'onceflow_webhook_spool_depth',
    help: 'Webhook deliveries waiting in the spool (refreshed by the drainer about every second)',
    labelNames: ['provider'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'onceflow_' });
  }

  duplicate(guard: DuplicateGuard): void {
    this.duplicatesSuppressed.inc({ guard });
  }
}
