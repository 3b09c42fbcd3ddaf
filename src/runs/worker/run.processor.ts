import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { Job, Queue } from 'bull';
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
import type { ExecutionResult } from '../executor/executor';
import { RunStatus } from '../run-status';
import { AttemptRunner } from './attempt-runner';
import { RunClaimService } from './run-claim.service';
import { RunFinalizer } from './run-finalizer';
import { decideOutcome } from './run-outcome';

export type RunJobOutcome = 'succeeded' | 'failed' | 'fenced' | `skipped: ${string}`;

/**
 * The runs queue processor: guard (run lock, via TaskLockService) → claim → run the attempt
 * (AttemptRunner) → decide (decideOutcome) → fenced finalize. Registered only in processes with the worker role.
 */
@Injectable()
export class RunProcessor implements OnModuleInit {
  private readonly logger = new Logger(RunProcessor.name);

  constructor(
    @InjectQueue(RUNS_QUEUE) private readonly queue: Queue<RunJobData>,
    private readonly taskLock: TaskLockService,
    private readonly claims: RunClaimService,
    private readonly finalizer: RunFinalizer,
    private readonly attempts: AttemptRunner,
    private readonly kicker: NotificationKicker,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(WORKER_ID) private readonly workerId: string,
  ) {}

  onModuleInit(): void {
    this.taskLock.process(this.queue, {
      name: 'runs',
      concurrency: this.config.worker.concurrency,
      ttlMs: this.config.runs.lockTtlMs,
      lockKey: (job) => runLockKey(job.data.runId),
      fencedInPostgres: true,
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
    this.logger.log({ msg: 'run started', runId, jobId: job.id, attempt: run.attempts, fencingToken: token });
    // Each beat extends the lease in Postgres too (after the runner's keep-alive to the command host); zero
    // rows = cancelled or fenced out: the lease aborts and the command is killed.
    const running = this.attempts.run({ run, project }, lease);
    lease.onBeat(() => this.claims.extendLease(runId, token));
    const { result, stats } = await running;
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
