import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { Job, Queue } from 'bull';
import { join } from 'node:path';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { MetricsService } from '../../metrics/metrics.service';
import { WORKER_ID } from '../../locks/locks.module';
import { ShutdownAbort } from '../../locks/heartbeat';
import { RetryLaterError } from '../../locks/retry-later.error';
import { Lease, TaskLockService } from '../../locks/task-lock.service';
import { NotificationKicker } from '../../notifications/notification-kicker';
import { runLockKey } from '../../queues/job-ids';
import { RUNS_QUEUE, RunJobData } from '../../queues/queue-names';
import { RUN_EXECUTOR } from '../executor/executor';
import type { ExecutionResult, RunExecutor } from '../executor/executor';
import { RunStatus } from '../run-status';
import { CommandAccess, CommandAccessHandle, describeStats } from '../steps/command-access';
import { RunClaimService } from './run-claim.service';
import { RunFinalizer } from './run-finalizer';
import { decideOutcome } from './run-outcome';

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
    @Inject(RUN_EXECUTOR) private readonly executor: RunExecutor,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(WORKER_ID) private readonly workerId: string,
    private readonly access: CommandAccess,
  ) {}

  onModuleInit(): void {
    this.taskLock.process(this.queue, {
      name: 'runs',
      concurrency: this.config.worker.concurrency,
      ttlMs: this.config.runs.lockTtlMs,
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
    lease.onBeat(async () => {
      ping?.();
      return true;
    });
    // Each beat also extends the lease in Postgres; zero rows = cancelled or fenced out: stop.
    lease.onBeat(() => this.claims.extendLease(runId, token));
    const workspace = run.task_id
      ? join(this.config.runs.workspaceRoot, project.id, 'tasks', run.task_id)
      : project.workspace_path;
    this.logger.log({ msg: 'run started', runId, jobId: job.id, attempt: run.attempts, fencingToken: token });
    // The command's credential lives exactly as long as this attempt's lease.
    const access: CommandAccessHandle | undefined = this.executor.usesRunApi
      ? await this.access.open({
          runId,
          projectId: project.id,
          attempt: run.attempts,
          fencingToken: token,
          signal: lease.signal,
        })
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
          timeoutMs: this.config.runs.timeoutMs,
          // A fifth of the TTL is the watchdog's time to notice and kill before the lock can lapse.
          guardUntil: () => lease.validUntil - Math.ceil(this.config.runs.lockTtlMs * 0.2),
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
    const attempt = { job, attempt: run.attempts, token, projectName: project.name, requirement: run.requirement };
    return this.record(attempt, result, lease, stats);
  }

  /** Carries out decideOutcome(): hand over, abandon, or the fenced write of the attempt's result. */
  private async record(
    a: AttemptContext,
    result: ExecutionResult,
    lease: Lease,
    stats: string,
  ): Promise<RunJobOutcome> {
    const { runId } = a.job.data;
    const cause =
      result.outcome !== 'aborted' ? null : lease.signal.reason instanceof ShutdownAbort ? 'shutdown' : 'lost';
    const outcome = decideOutcome(
      result,
      a.attempt,
      {
        maxAttempts: this.config.runs.maxAttempts,
        retryBaseDelayMs: this.config.runs.retryBaseDelayMs,
        retryMaxDelayMs: this.config.runs.retryMaxDelayMs,
        timeoutMs: this.config.runs.timeoutMs,
        lockTtlMs: this.config.runs.lockTtlMs,
      },
      cause,
      stats,
    );
    if (outcome.kind === 'hand-over') {
      // Another worker starts it now instead of after a lock TTL.
      await this.finalizer.handOver(runId, a.token, this.workerId);
      throw new RetryLaterError(0, 'handed over: worker shutting down');
    }
    if (outcome.kind === 'abandon') {
      // If nobody else took the run, the job comes back after a lock TTL and the claim sorts it out.
      this.logger.warn({
        msg: 'run attempt aborted',
        runId,
        jobId: a.job.id,
        attempt: a.attempt,
        reason: String(lease.signal.reason),
      });
      throw new RetryLaterError(outcome.delayMs, 'attempt aborted (lock lost or cancelled)');
    }
    const { to, reason, lastError, delayMs } = outcome;
    const finalized = await this.finalizer.finalize({
      runId,
      token: a.token,
      projectName: a.projectName,
      requirement: a.requirement,
      outputTail: result.outputTail,
      workerId: this.workerId,
      to,
      lastError,
      reason,
    });
    if (finalized.kind === 'fenced') {
      this.logger.warn({
        msg: 'finalize fenced out: a newer holder owns the run',
        runId,
        jobId: a.job.id,
        fencingToken: a.token,
      });
      return 'fenced';
    }
    // Without a Slack URL the row is SKIPPED and no process takes notification jobs: a kick would
    // only leave a job nobody ever consumes.
    if (finalized.notificationId && this.config.notify.slackWebhookUrl)
      await this.kicker.kick(finalized.notificationId).catch(() => undefined);
    this.logger.log({ msg: 'run finished attempt', runId, jobId: a.job.id, attempt: a.attempt, status: to, reason });
    if (to === RunStatus.RETRYING) throw new RetryLaterError(delayMs, reason);
    return to === RunStatus.SUCCESS ? 'succeeded' : 'failed';
  }
}

interface AttemptContext {
  job: Job<RunJobData>;
  attempt: number;
  token: string;
  projectName: string;
  requirement: string;
}
