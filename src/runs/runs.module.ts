import { DynamicModule, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { AppRole, roleRunsWorkers, roleServesApi } from '../config/roles';
import { APP_CONFIG } from '../config/config.module';
import { processEnvironment } from '../config/env';
import { OutboxModule } from '../notifications/outbox.module';
import { BulkDispatchService } from './bulk-dispatch.service';
import { DispatchRepository } from './dispatch.repository';
import { DispatchService } from './dispatch.service';
import { EnqueueBatch } from './enqueue-batch';
import { RUN_EXECUTOR, RunExecutor } from './executor/executor';
import { NoopExecutor } from './executor/noop-executor';
import { prepareWorkspaceRoot, resolveRunIdentity } from './executor/run-identity';
import { ShellExecutor } from './executor/shell-executor';
import { IdempotencyPruner } from './idempotency/idempotency-pruner';
import { IdempotencyRepository } from './idempotency/idempotency.repository';
import { IdempotencyService } from './idempotency/idempotency.service';
import { ProjectsController } from './projects/projects.controller';
import { ProjectsRepository } from './projects/projects.repository';
import { ProjectsService } from './projects/projects.service';
import { RunTransitionsRepository } from './run-transitions.repository';
import { ClaimBatch } from './worker/claim-batch';
import { FinalizeBatch } from './worker/finalize-batch';
import { RunClaimService } from './worker/run-claim.service';
import { RunFinalizer } from './worker/run-finalizer';
import { RunQueueReconciler } from './worker/run-queue-reconciler';
import { RunReaper } from './worker/run-reaper';
import { RunClaimRepository } from './worker/run-claim.repository';
import { RunWorkerRepository } from './worker/run-worker.repository';
import { AttemptRunner } from './worker/attempt-runner';
import { RunProcessor } from './worker/run.processor';
import { RunsController } from './runs.controller';
import { RunsRepository } from './runs.repository';
import { RunsService } from './runs.service';
import { LlmCachePruner } from './llm-cache/llm-cache-pruner';
import { LlmCacheRepository } from './llm-cache/llm-cache.repository';
import { LlmProxy } from './llm-cache/llm-proxy';
import { CommandAccess } from './steps/command-access';
import { OnceflowBin } from './steps/onceflow-bin';
import { RunAttempts } from './steps/run-attempts';
import { StepJournalRepository } from './steps/step-journal.repository';
import { WorkerApiServer } from './steps/worker-api.server';

const CORE = [
  ProjectsService,
  RunsService,
  DispatchService,
  BulkDispatchService,
  EnqueueBatch,
  IdempotencyService,
  RunTransitionsRepository,
  StepJournalRepository,
  LlmCacheRepository,
];
const REPOSITORIES = [
  DispatchRepository,
  IdempotencyRepository,
  ProjectsRepository,
  RunsRepository,
  RunWorkerRepository,
  RunClaimRepository,
];
/** The worker's API for its own commands: steps, values and the LLM proxy. */
const COMMAND_API = [RunAttempts, LlmProxy, WorkerApiServer, OnceflowBin, CommandAccess];
// Registered in every role; ScheduledTasks only runs it where the role includes the scheduler.
const SCHEDULED = [RunReaper, RunQueueReconciler, LlmCachePruner, IdempotencyPruner];

/** Projects, runs, the state machine, dispatch; the processor only where the role runs workers. */
@Module({})
export class RunsModule {
  static register(role: AppRole): DynamicModule {
    const worker = roleRunsWorkers(role)
      ? [
          RunClaimService,
          FinalizeBatch,
          ClaimBatch,
          RunFinalizer,
          AttemptRunner,
          RunProcessor,
          ...COMMAND_API,
          {
            provide: RUN_EXECUTOR,
            inject: [APP_CONFIG],
            useFactory: (config: AppConfig): RunExecutor => {
              if (config.runs.executor === 'noop') return new NoopExecutor();
              const identity = resolveRunIdentity(config.runs.runAsUser);
              prepareWorkspaceRoot(config.runs.workspaceRoot, identity);
              const shell = new ShellExecutor(
                config.runs.command,
                processEnvironment(),
                identity,
                config.runs.workspaceRoot,
                config.runs.envPassthrough,
              );
              // Booted with the worker, not on its first command's path.
              shell.host.start();
              return shell;
            },
          },
        ]
      : [];
    return {
      module: RunsModule,
      imports: [OutboxModule],
      providers: [...CORE, ...REPOSITORIES, ...SCHEDULED, ...worker],
      controllers: roleServesApi(role) ? [ProjectsController, RunsController] : [],
      exports: [...CORE],
    };
  }
}
