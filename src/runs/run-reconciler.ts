import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Queue } from 'bull';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { queryRows } from '../database/transaction';
import { LockService } from '../locks/lock.service';
import { LOCK_SERVICE } from '../locks/locks.tokens';
import { WORKER_ID } from '../locks/locks.module';
import { runJobId, runLockKey } from '../queues/job-ids';
import { RUNS_QUEUE, RunJobData } from '../queues/queue-names';
import { ScheduledTasks } from '../scheduler/scheduled-tasks.service';
import { OutboxWriter } from '../notifications/outbox.writer';
import { DispatchService } from './dispatch.service';
import { renderText, withOutboxRow } from './run-finalizer';
import { RunStatus } from './run-status';
import { RunRow, RunTransitionsRepository } from './run-transitions.repository';

export const REAP_TASK = 'runs.reap-stuck';
export const RECONCILE_TASK = 'runs.reconcile-queue';
const LIVE_JOB_STATES = new Set(['waiting', 'active', 'delayed', 'paused']);
const BATCH = 200;

/**
 * Postgres is the truth and Redis is rebuilt from it:
 * - the reaper takes RUNNING runs whose lease expired and whose lock is gone (a dead worker whose
 *   job Bull lost too) back to RETRYING — or FAILED when attempts are spent — and re-enqueues them;
 * - the reconciler re-enqueues QUEUED/RETRYING runs that have no live Bull job (Redis restarted
 *   without persistence, a flushed queue, an add lost to a Redis outage), under a new generation's
 *   job id so a leftover completed/failed job cannot swallow the add.
 */
@Injectable()
export class RunReconciler implements OnModuleInit {
  private readonly logger = new Logger(RunReconciler.name);

  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    @InjectQueue(RUNS_QUEUE) private readonly queue: Queue<RunJobData>,
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    private readonly transitions: RunTransitionsRepository,
    private readonly dispatcher: DispatchService,
    private readonly outbox: OutboxWriter,
    private readonly scheduled: ScheduledTasks,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(WORKER_ID) private readonly workerId: string,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(REAP_TASK, () => this.reapStuck());
    this.scheduled.register(RECONCILE_TASK, () => this.reconcileQueue());
  }

  async reapStuck(): Promise<{ retried: number; failed: number }> {
    const stuck = await queryRows<{ id: string; fencing_token: string; attempts: number; requirement: string; project_name: string }>(
      this.ds,
      `SELECT r.id, r.fencing_token, r.attempts, r.requirement, p.name AS project_name
         FROM runs r JOIN projects p ON p.id = r.project_id
        WHERE r.status = 'RUNNING' AND r.lease_expires_at < now() ORDER BY r.lease_expires_at LIMIT ${BATCH}`,
    );
    let retried = 0;
    let failed = 0;
    for (const run of stuck) {
      if ((await this.locks.remainingMs(runLockKey(run.id))) > 0) continue; // a holder is alive
      const spent = run.attempts >= this.config.runMaxAttempts;
      const failedMessage = { eventType: 'run.failed' as const, text: renderText(run.id, run.project_name, RunStatus.FAILED, run.requirement) };
      const row = await this.transitions.transition<RunRow & { notification_id?: string | null }>(run.id, {
        to: spent ? RunStatus.FAILED : RunStatus.RETRYING,
        from: [RunStatus.RUNNING],
        fencingToken: run.fencing_token,
        where: 'r.lease_expires_at < now()',
        set: [
          'lease_owner = NULL',
          'lease_expires_at = NULL',
          "last_error = 'worker lost (lease expired)'",
          spent ? 'finished_at = now()' : 'dispatch_generation = r.dispatch_generation + 1',
        ],
        // A FAILED run is announced like any other: the outbox row is part of the transition's statement.
        ...(spent ? withOutboxRow(this.outbox, failedMessage) : {}),
        reason: spent ? 'reaper: worker lost and attempts spent' : 'reaper: worker lost, re-enqueued',
        workerId: this.workerId,
      });
      if (row && spent) this.outbox.written(row.notification_id ?? null);
      if (!row) continue;
      if (spent) failed++;
      else {
        retried++;
        await this.dispatcher.enqueue(row);
      }
      this.logger.warn({ msg: 'reaped a stuck run', runId: run.id, to: row.status });
    }
    return { retried, failed };
  }

  async reconcileQueue(): Promise<{ requeued: number }> {
    const graceMs = Math.max(2 * this.config.reconcileIntervalMs, 2000);
    const waiting = await queryRows<{ id: string; dispatch_generation: number }>(
      this.ds,
      `SELECT id, dispatch_generation FROM runs
        WHERE status IN ('QUEUED', 'RETRYING') AND updated_at < now() - $1 * interval '1 millisecond'
        ORDER BY updated_at LIMIT ${BATCH}`,
      [graceMs],
    );
    let requeued = 0;
    for (const run of waiting) {
      const job = await this.queue.getJob(runJobId(run.id, run.dispatch_generation));
      if (job && LIVE_JOB_STATES.has(await job.getState())) continue;
      // Bump the generation only if nobody else did: the new job id is then ours alone.
      const bumped = await queryRows<{ id: string; dispatch_generation: number }>(
        this.ds,
        `UPDATE runs SET dispatch_generation = dispatch_generation + 1, updated_at = now()
          WHERE id = $1 AND status IN ('QUEUED', 'RETRYING') AND dispatch_generation = $2
          RETURNING id, dispatch_generation`,
        [run.id, run.dispatch_generation],
      );
      if (!bumped[0]) continue;
      await this.dispatcher.enqueue(bumped[0]);
      requeued++;
      this.logger.warn({ msg: 're-enqueued a run that had no live job', runId: run.id, generation: bumped[0].dispatch_generation });
    }
    return { requeued };
  }
}
