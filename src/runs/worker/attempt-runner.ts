import { Inject, Injectable } from '@nestjs/common';
import { join } from 'node:path';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import type { Lease } from '../../locks/task-lock.service';
import { MetricsService } from '../../metrics/metrics.service';
import { RUN_EXECUTOR } from '../executor/executor';
import type { ExecutionResult, RunExecutor } from '../executor/executor';
import type { ClaimedRun } from './run-claim.repository';
import { CommandAccess, CommandAccessHandle, describeStats } from '../steps/command-access';

export interface ClaimedAttempt {
  run: ClaimedRun;
  project: { id: string; name: string; workspace_path: string };
}

export interface AttemptRun {
  result: ExecutionResult;
  /** What the command did through its worker ("steps: 2 run, …"), for the finalize reason. */
  stats: string;
}

/**
 * Runs one claimed attempt's command under its lease: the workspace, the attempt's credential
 * (alive exactly as long as the attempt), the executor's request with its deadline in the command
 * host, and the output tail with the credential redacted. The lease's beats move that deadline on.
 */
@Injectable()
export class AttemptRunner {
  constructor(
    @Inject(RUN_EXECUTOR) private readonly executor: RunExecutor,
    private readonly access: CommandAccess,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async run({ run, project }: ClaimedAttempt, lease: Lease): Promise<AttemptRun> {
    const runId = run.id;
    const token = run.fencing_token;
    // The command's deadline moves on with every beat that renewed the run lock (checks run only
    // after a successful extend); registered before the caller's Postgres check, so a failing
    // check cannot starve it.
    let ping: (() => void) | undefined;
    lease.onBeat(async () => {
      ping?.();
      return true;
    });
    const workspace = run.task_id
      ? join(this.config.runs.workspaceRoot, project.id, 'tasks', run.task_id)
      : project.workspace_path;
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
          // A fifth of the TTL is the command host's time to notice and kill before the lock can lapse.
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
    return { result, stats: access ? describeStats(access.stats) : '' };
  }
}
