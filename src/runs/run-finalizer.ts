import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { isTransientDbError } from '../database/transaction';
import { MetricsService } from '../metrics/metrics.service';
import { NotificationEventType } from '../notifications/notification-log.entity';
import { OutboxMessage, OutboxWriter } from '../notifications/outbox.writer';
import { escapeSlackText } from '../notifications/slack-text';
import { RunStatus } from './run-status';
import { RunRow, RunTransitionsRepository, TransitionSpec } from './run-transitions.repository';

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

export type FinalizeResult = { written: true; row: RunRow; notificationId: string | null } | { written: false };

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
    private readonly transitions: RunTransitionsRepository,
    private readonly outbox: OutboxWriter,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async finalize(req: FinalizeRequest): Promise<FinalizeResult> {
    let delay = 50;
    let ambiguous = false;
    const deadline = Date.now() + Math.max(10 * 60_000, this.config.runLockTtlMs * 10);
    for (;;) {
      try {
        const result = await this.writeOnce(req);
        if (!result.written && ambiguous) return this.settle(req);
        if (!result.written) this.metrics.duplicate('fence');
        return result;
      } catch (err) {
        if (!isTransientDbError(err) || Date.now() > deadline) throw err;
        ambiguous = true;
        this.logger.warn({ msg: 'finalize failed on a connection error; retrying', runId: req.runId, retryInMs: delay, err: String(err) });
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  /**
   * ONE statement (autocommit, prepared): the fenced transition, its run_events row and, for a
   * terminal outcome, the outbox row — all or nothing, in one round trip.
   */
  private async writeOnce(req: FinalizeRequest): Promise<FinalizeResult> {
    const terminal = req.to !== RunStatus.RETRYING;
    const eventType: NotificationEventType = req.to === RunStatus.SUCCESS ? 'run.succeeded' : 'run.failed';
    const message = terminal ? { eventType, text: renderText(req.runId, req.projectName, req.to, req.requirement) } : null;
    const row = await this.transitions.transition<RunRow & { notification_id?: string | null }>(req.runId, {
      to: req.to,
      from: [RunStatus.RUNNING],
      fencingToken: req.token,
      set: [
        'output_tail = $7',
        'last_error = $8',
        'lease_owner = NULL',
        'lease_expires_at = NULL',
        terminal ? 'finished_at = now()' : 'finished_at = NULL',
      ],
      params: [req.outputTail, req.lastError],
      ...(message ? withOutboxRow(this.outbox, message) : {}),
      reason: req.reason,
      workerId: req.workerId,
    });
    if (!row) return { written: false };
    const notificationId = row.notification_id ?? null;
    if (message) this.outbox.written(notificationId);
    delete row.notification_id;
    return { written: true, row, notificationId };
  }

  /** RUNNING → RETRYING without counting the interrupted attempt (a graceful shutdown). */
  async handOver(runId: string, token: string, workerId: string): Promise<boolean> {
    const row = await this.transitions.transition(runId, {
      to: RunStatus.RETRYING,
      from: [RunStatus.RUNNING],
      fencingToken: token,
      set: ['attempts = GREATEST(r.attempts - 1, 0)', 'lease_owner = NULL', 'lease_expires_at = NULL'],
      reason: 'worker shutting down: handed over',
      workerId,
    });
    return row !== null;
  }

  /** After a commit whose answer was lost: did our write land? */
  private async settle(req: FinalizeRequest): Promise<FinalizeResult> {
    const rows: RunRow[] = await this.ds.query('SELECT *, status AS from_status FROM runs WHERE id = $1', [req.runId]);
    const row = rows[0];
    if (row && row.status === req.to && row.fencing_token === req.token) {
      const n: Array<{ id: string }> = await this.ds.query('SELECT id FROM notification_logs WHERE run_id = $1 ORDER BY created_at DESC LIMIT 1', [
        req.runId,
      ]);
      return { written: true, row, notificationId: n[0]?.id ?? null };
    }
    this.metrics.duplicate('fence');
    return { written: false };
  }
}

/**
 * The parts of a transition spec that make its statement also write the outbox row (a CTE over
 * the updated run) and return the row's id as `notification_id` (null: it existed already).
 */
export function withOutboxRow(outbox: OutboxWriter, message: Omit<OutboxMessage, 'runId'>): Pick<TransitionSpec, 'with' | 'output'> {
  return {
    with: (firstParam) => outbox.cte(message, 'upd', firstParam),
    output: { columns: ', (SELECT id FROM outbox) AS notification_id' },
  };
}

export function renderText(runId: string, projectName: string, status: RunStatus, requirement: string): string {
  // Cut before escaping, so the 200 characters are the user's and no entity is cut in half.
  const firstLine = (requirement.split(/\r?\n/).find((l) => l.trim()) ?? '').trim().slice(0, 200);
  const icon = status === RunStatus.SUCCESS ? ':white_check_mark:' : ':x:';
  return `${icon} Run ${runId} in project ${escapeSlackText(projectName)}: ${status} — ${escapeSlackText(firstLine)}`;
}
