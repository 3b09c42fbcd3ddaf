import { InjectQueue } from '@nestjs/bull';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { queryRows } from '../database/transaction';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { Job, Queue } from 'bull';
import { join } from 'node:path';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { MetricsService } from '../metrics/metrics.service';
import { WORKER_ID } from '../locks/locks.module';
import { ShutdownAbort } from '../locks/heartbeat';
import { RetryLaterError } from '../locks/retry-later.error';
import { Lease, TaskLockService } from '../locks/task-lock.service';
import { NotificationKicker } from '../notifications/notification-kicker';
import { runLockKey } from '../queues/job-ids';
import { RUNS_QUEUE, RunJobData } from '../queues/queue-names';
import { RUN_EXECUTOR } from './executor/executor';
import type { ExecutionResult, RunExecutor } from './executor/executor';
import { retryDelayMs } from './retry-policy';
import { RunClaimService } from './run-claim.service';
import { RunFinalizer } from './run-finalizer';
import { RunStatus } from './run-status';
import { CommandAccess, CommandAccessHandle, describeStats } from './steps/command-access';

export type RunJobOutcome = 'succeeded' | 'failed' | 'fenced' | `skipped: ${string}`;

/**
 * The runs queue processor: guard (run lock, via TaskLockService) → claim → execute → fenced
 * finalize. Registered only in processes with the worker role.
 */
@Injectable()
export class RunProcessor implements OnModuleInit {
  private readonly logger = new Logger(RunProcessor.name);

  constructor(
    @InjectQueue(RUNS_QUEUE) private readonly queue: Queue<RunJobData>,
    private readonly taskLock: TaskLockService,
    private readonly claims: RunClaimService,
    private readonly finalizer: RunFinalizer,
    private readonly kicker: NotificationKicker,
    private readonly metrics: MetricsService,
    @InjectDataSource() private readonly ds: DataSource,
    @Inject(RUN_EXECUTOR) private readonly executor: RunExecutor,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(WORKER_ID) private readonly workerId: string,
    private readonly access: CommandAccess,
  ) {}

  onModuleInit(): void {
    this.taskLock.process(this.queue, {
      name: 'runs',
      concurrency: this.config.workerConcurrency,
      ttlMs: this.config.runLockTtlMs,
      lockKey: (job) => runLockKey(job.data.runId),
      handler: (job, lease) => this.handle(job, lease),
    });
  }

  async handle(job: Job<RunJobData>, lease: Lease): Promise<RunJobOutcome> {
    const { runId } = job.data;
    const claim = await this.claims.claim(runId, lease.token, lease.owner, this.workerId);
    if (claim.kind === 'later') throw new RetryLaterError(claim.delayMs, claim.reason);
    if (claim.kind === 'skip') {
      this.metrics.duplicate('claim');
      this.logger.log({ msg: 'run not claimed', runId, jobId: job.id, reason: claim.reason });
      return `skipped: ${claim.reason}`;
    }
    const { run, project } = claim;
    const token = run.fencing_token;
    // The command's watchdog is fed on every beat that renewed the run lock (checks run only
    // after a successful extend); registered first, so a failing Postgres check cannot starve it.
    let ping: (() => void) | undefined;
    let renewedAt = Date.now();
    lease.onBeat(async () => {
      renewedAt = Date.now();
      ping?.();
      return true;
    });
    // Each beat also extends the lease in Postgres; zero rows = cancelled or fenced out: stop.
    lease.onBeat(async () => {
      const rows = await queryRows(
        this.ds,
        `UPDATE runs SET lease_expires_at = now() + $3 * interval '1 millisecond'
          WHERE id = $1 AND fencing_token = $2 AND status = 'RUNNING' RETURNING id`,
        [runId, token, this.config.runLockTtlMs],
      );
      return rows.length > 0;
    });
    const workspace = run.task_id ? join(this.config.workspaceRoot, project.id, 'tasks', run.task_id) : project.workspace_path;
    this.logger.log({ msg: 'run started', runId, jobId: job.id, attempt: run.attempts, fencingToken: token });
    // The command's credential lives exactly as long as this attempt's lease.
    const access: CommandAccessHandle | undefined = this.executor.usesRunApi
      ? await this.access.open({ runId, projectId: project.id, attempt: run.attempts, fencingToken: token, signal: lease.signal })
      : undefined;
    let result: ExecutionResult;
    try {
      result = await this.executor.execute(
        {
          runId,
          attempt: run.attempts,
          fencingToken: token,
          requirement: run.requirement,
          projectId: project.id,
          projectName: project.name,
          projectWorkspace: project.workspace_path,
          taskId: run.task_id,
          workspace,
          idempotencyKey: `onceflow-run-${runId}`,
          timeoutMs: this.config.runTimeoutMs,
          watchdogMs: Math.floor(this.config.runLockTtlMs * 0.8),
          watchdogFrom: () => renewedAt,
          keepAlive: (p) => (ping = p),
          runApi: access?.runApi,
        },
        lease.signal,
      );
    } finally {
      access?.close();
    }
    if (access) result = { ...result, outputTail: access.redact(result.outputTail) };
    this.metrics.runDuration.observe({ outcome: result.outcome }, result.durationMs / 1000);
    const stats = access ? describeStats(access.stats) : '';
    return this.finish(job, run.attempts, token, project.name, run.requirement, result, lease, stats);
  }

  private async finish(
    job: Job<RunJobData>,
    attempt: number,
    token: string,
    projectName: string,
    requirement: string,
    result: ExecutionResult,
    lease: Lease,
    stats: string,
  ): Promise<RunJobOutcome> {
    const { runId } = job.data;
    if (result.outcome === 'aborted' && lease.signal.reason instanceof ShutdownAbort) {
      // We are shutting down while the lock is still ours: hand the run straight back to the
      // queue (RETRYING, attempt not counted) so another worker starts it now, not after a TTL.
      await this.finalizer.handOver(runId, token, this.workerId);
      throw new RetryLaterError(0, 'handed over: worker shutting down');
    }
    if (result.outcome === 'aborted') {
      // Lock lost or run cancelled: whatever happened is not ours to record. If nobody else took
      // the run, the job comes back after a lock TTL and the claim sorts it out.
      this.logger.warn({ msg: 'run attempt aborted', runId, jobId: job.id, attempt, reason: String(lease.signal.reason) });
      throw new RetryLaterError(this.config.runLockTtlMs + 100, 'attempt aborted (lock lost or cancelled)');
    }
    const base = { runId, token, projectName, requirement, outputTail: result.outputTail, workerId: this.workerId };
    const describe = result.startError
      ? `could not start the command: ${result.startError}`
      : result.timedOut
        ? `timed out after ${this.config.runTimeoutMs} ms`
        : result.signal
          ? `killed by ${result.signal}`
          : `exit ${result.exitCode}`;
    let to: RunStatus.SUCCESS | RunStatus.FAILED | RunStatus.RETRYING;
    let reason = describe;
    let delay = 0;
    if (result.outcome === 'success') to = RunStatus.SUCCESS;
    else if (result.outcome === 'transient' && attempt < this.config.runMaxAttempts) {
      to = RunStatus.RETRYING;
      delay = retryDelayMs(attempt, this.config.runRetryBaseDelayMs, this.config.runRetryMaxDelayMs);
      reason = `${describe} (transient); retry in ${delay} ms`;
    } else {
      to = RunStatus.FAILED;
      if (result.outcome === 'transient') reason = `${describe} (transient); attempts exhausted (${attempt}/${this.config.runMaxAttempts})`;
    }
    const lastError = to === RunStatus.SUCCESS ? null : describe;
    if (stats) reason = `${reason}; ${stats}`;
    const fin = await this.finalizer.finalize({ ...base, to, lastError, reason });
    if (!fin.written) {
      this.logger.warn({ msg: 'finalize fenced out: a newer holder owns the run', runId, jobId: job.id, fencingToken: token });
      return 'fenced';
    }
    // Without a Slack URL the row is SKIPPED and no process takes notification jobs: a kick would
    // only cost Redis round trips and leave a job nobody ever consumes.
    if (fin.notificationId && this.config.slackWebhookUrl) await this.kicker.kick(fin.notificationId).catch(() => undefined);
    this.logger.log({ msg: 'run finished attempt', runId, jobId: job.id, attempt, status: to, reason });
    if (to === RunStatus.RETRYING) throw new RetryLaterError(delay, reason);
    return to === RunStatus.SUCCESS ? 'succeeded' : 'failed';
  }
}
