import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { LockService } from '../../locks/lock.service';
import { WORKER_ID } from '../../locks/locks.module';
import { LOCK_SERVICE } from '../../locks/locks.tokens';
import { OutboxWriter } from '../../notifications/outbox.writer';
import { runLockKey } from '../../queues/job-ids';
import { ScheduledTasks } from '../../scheduler/scheduled-tasks.service';
import { DispatchService } from '../dispatch.service';
import { RunStatus } from '../run-status';
import { renderText } from './run-message';
import { RunWorkerRepository } from './run-worker.repository';

export const REAP_TASK = 'runs.reap-stuck';
const BATCH = 200;

/**
 * Takes RUNNING runs whose lease expired and whose lock is gone (a dead worker whose job Bull lost
 * too) back to RETRYING and re-enqueues them — or to FAILED, announced, when attempts are spent.
 */
@Injectable()
export class RunReaper implements OnModuleInit {
  private readonly logger = new Logger(RunReaper.name);

  constructor(
    private readonly runs: RunWorkerRepository,
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    private readonly dispatcher: DispatchService,
    private readonly outbox: OutboxWriter,
    private readonly scheduled: ScheduledTasks,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(WORKER_ID) private readonly workerId: string,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(REAP_TASK, () => this.reapStuck());
  }

  async reapStuck(): Promise<{ retried: number; failed: number }> {
    let retried = 0;
    let failed = 0;
    for (const run of await this.runs.findExpiredLeases(BATCH)) {
      if ((await this.locks.remainingMs(runLockKey(run.id))) > 0) continue; // a holder is alive
      const spent = run.attempts >= this.config.runs.maxAttempts;
      // A FAILED run is announced like any other: the outbox row is part of the transition's statement.
      const outbox = spent
        ? this.outbox.cte(
            { eventType: 'run.failed', text: renderText(run.id, run.project_name, RunStatus.FAILED, run.requirement) },
            'upd',
          )
        : null;
      const row = await this.runs.reapLost(run, { spent, outbox, workerId: this.workerId });
      if (!row) continue;
      if (spent) {
        this.outbox.written(row.notification_id ?? null);
        failed++;
      } else {
        retried++;
        await this.dispatcher.enqueue(row);
      }
      this.logger.warn({ msg: 'reaped a stuck run', runId: run.id, to: row.status });
    }
    return { retried, failed };
  }
}
