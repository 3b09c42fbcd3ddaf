import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { retryWithBackoff } from '../../common/backoff';
import { isTransientDbError } from '../../database/pg-errors';
import { MetricsService } from '../../metrics/metrics.service';
import { NotificationEventType } from '../../notifications/notification-log.entity';
import { OutboxWriter } from '../../notifications/outbox.writer';
import { RunStatus } from '../run-status';
import { FinalizeBatch } from './finalize-batch';
import { renderText } from './run-message';
import { FinalizedRun, RunWorkerRepository } from './run-worker.repository';

export interface FinalizeRequest {
  runId: string;
  token: string;
  to: RunStatus.SUCCESS | RunStatus.FAILED | RunStatus.RETRYING;
  projectName: string;
  requirement: string;
  outputTail: string;
  lastError: string | null;
  reason: string;
  workerId: string;
}

export type FinalizeResult = { kind: 'written'; row: FinalizedRun; notificationId: string | null } | { kind: 'fenced' };

/**
 * The fenced finalize: `UPDATE … WHERE id = $1 AND fencing_token = $token AND status = 'RUNNING'`
 * plus, for a terminal outcome, the outbox row — one transaction. Zero rows means a newer holder
 * (or a cancel) owns the run: write nothing more. Connection errors are retried with backoff for
 * as long as it takes (a lost finalize would leave a finished run RUNNING); an ambiguous commit is
 * settled by reading the row back.
 */
@Injectable()
export class RunFinalizer {
  private readonly logger = new Logger(RunFinalizer.name);

  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly runs: RunWorkerRepository,
    private readonly batch: FinalizeBatch,
    private readonly outbox: OutboxWriter,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async finalize(req: FinalizeRequest): Promise<FinalizeResult> {
    return retryWithBackoff(
      async (ambiguous) => {
        const result = await this.writeOnce(req);
        if (result.kind === 'fenced' && ambiguous) return this.settle(req);
        if (result.kind === 'fenced') this.metrics.duplicate('fence');
        return result;
      },
      {
        retryable: isTransientDbError,
        firstDelayMs: 50,
        maxDelayMs: 5000,
        deadline: Date.now() + Math.max(10 * 60_000, this.config.runs.lockTtlMs * 10),
        onRetry: (err, delay) =>
          this.logger.warn({
            msg: 'finalize failed on a connection error; retrying',
            runId: req.runId,
            retryInMs: delay,
            err: String(err),
          }),
      },
    );
  }

  /**
   * ONE statement (autocommit, prepared), shared with the finalizes this process makes at the same
   * moment (FinalizeBatch): the fenced transition, its run_events row and, for a terminal outcome,
   * the outbox row — all or nothing, in one round trip.
   */
  private async writeOnce(req: FinalizeRequest): Promise<FinalizeResult> {
    const terminal = req.to !== RunStatus.RETRYING;
    const eventType: NotificationEventType = req.to === RunStatus.SUCCESS ? 'run.succeeded' : 'run.failed';
    const row = await this.batch.write({
      runId: req.runId,
      to: req.to,
      fencingToken: req.token,
      outputTail: req.outputTail,
      lastError: req.lastError,
      reason: req.reason,
      workerId: req.workerId,
      outbox: terminal
        ? {
            eventType,
            message: this.outbox.message({ text: renderText(req.runId, req.projectName, req.to, req.requirement) }),
          }
        : null,
    });
    if (!row) return { kind: 'fenced' };
    const notificationId = row.notification_id ?? null;
    if (terminal) this.outbox.written(notificationId);
    delete row.notification_id;
    return { kind: 'written', row, notificationId };
  }

  /** RUNNING → RETRYING without counting the interrupted attempt (a graceful shutdown). */
  async handOver(runId: string, token: string, workerId: string): Promise<boolean> {
    return (await this.runs.handOver(runId, token, workerId)) !== null;
  }

  /** After a commit whose answer was lost: did our write land? */
  private async settle(req: FinalizeRequest): Promise<FinalizeResult> {
    const row = await this.runs.readBack(req.runId);
    if (row && row.status === req.to && row.fencing_token === req.token) {
      return { kind: 'written', row, notificationId: await this.outbox.latestIdForRun(this.ds, req.runId) };
    }
    this.metrics.duplicate('fence');
    return { kind: 'fenced' };
  }
}
