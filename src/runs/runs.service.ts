import { Inject, Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import type { NamedStatement } from '../database/named-params';
import { projectNotFound, runNotFound, RunsError, RunsErrorCode } from './runs.errors';
import { toPage } from '../common/cursor';
import { WORKER_ID } from '../locks/locks.module';
import { EnqueueBatch } from './enqueue-batch';
import { RunKind, RunStatus } from './run-status';
import { RunRow, RunTransitionsRepository } from './run-transitions.repository';
import { RunEventList } from './run-event.view';
import { RunStepList } from './run-step.view';
import { RunPage, RunView, toRunView } from './run.view';
import { RunsRepository } from './runs.repository';
import { StepJournalRepository } from './steps/step-journal.repository';

export interface NewRun {
  projectId: string;
  requirement: string;
  dispatch?: boolean;
  taskId?: string | null;
  kind?: RunKind;
}

/** Born QUEUED (generation 1) when dispatched at once, else PENDING. */
function birth(input: Pick<NewRun, 'dispatch' | 'kind' | 'requirement'>) {
  return {
    kind: input.kind ?? RunKind.MANUAL,
    requirement: input.requirement,
    status: input.dispatch ? (RunStatus.QUEUED as const) : (RunStatus.PENDING as const),
    dispatchGeneration: input.dispatch ? 1 : 0,
  };
}

function creationReason(input: Pick<NewRun, 'dispatch'>): string {
  return input.dispatch ? 'created and dispatched' : 'created';
}

@Injectable()
export class RunsService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly transitions: RunTransitionsRepository,
    private readonly enqueues: EnqueueBatch,
    private readonly journal: StepJournalRepository,
    @Inject(WORKER_ID) private readonly workerId: string,
  ) {}

  /**
   * Inserts a run in the caller's transaction. With `dispatch` it is born QUEUED (generation 1):
   * nobody else knows its id yet, so no guard is needed; call `enqueueAfterCommit` once committed.
   */
  async createInTx(em: EntityManager, input: NewRun): Promise<RunRow> {
    const run = await this.runs.insert(em, {
      projectId: input.projectId,
      taskId: input.taskId ?? null,
      ...birth(input),
    });
    if (!run) throw projectNotFound(input.projectId);
    await this.transitions.recordCreated(em, run, creationReason(input), this.workerId);
    return run;
  }

  /**
   * createInTx() as CTEs (`run`, `run_created`) of the caller's statement, for each task that
   * `source` yields (`id`, `project_id`); the same row and event. Enqueue after commit as above.
   */
  creationCte(source: string, input: Omit<NewRun, 'projectId' | 'taskId'>): NamedStatement {
    return this.runs.creationCte(source, birth(input), { workerId: this.workerId, reason: creationReason(input) });
  }

  /** The job of a run committed QUEUED, added with the others of this turn (EnqueueBatch). */
  async enqueueAfterCommit(run: RunRow): Promise<void> {
    if (run.status === RunStatus.QUEUED) await this.enqueues.enqueue(run);
  }

  async create(input: NewRun): Promise<RunView> {
    const run = await this.runs.insertWithEvent(
      { projectId: input.projectId, taskId: input.taskId ?? null, ...birth(input) },
      { workerId: this.workerId, reason: creationReason(input) },
    );
    if (!run) throw projectNotFound(input.projectId);
    await this.enqueueAfterCommit(run);
    return toRunView(run);
  }

  async get(id: string): Promise<RunView> {
    const row = await this.runs.findById(id);
    if (!row) throw runNotFound(id);
    return toRunView(row, true);
  }

  async list(q: { projectId?: string; status?: RunStatus; limit: number; cursor?: string }): Promise<RunPage> {
    const rows = await this.runs.page(q);
    return toPage(rows, q.limit, (r) => toRunView(r));
  }

  async events(id: string): Promise<RunEventList> {
    await this.get(id);
    const rows = await this.runs.events(id);
    return {
      items: rows.map((e) => ({
        from: e.from_status,
        to: e.to_status,
        at: new Date(e.at).toISOString(),
        attempt: e.attempt,
        fencingToken: Number(e.fencing_token),
        workerId: e.worker_id,
        reason: e.reason,
      })),
    };
  }

  /** The run's step journal, in order of first start; recorded outputs are not part of it. */
  async steps(id: string): Promise<RunStepList> {
    await this.get(id);
    const rows = await this.journal.list(id);
    return {
      items: rows.map((s) => ({
        name: s.name,
        status: s.status,
        attempt: s.attempt,
        fencingToken: Number(s.fencing_token),
        exitCode: s.exit_code,
        outputBytes: s.output_bytes,
        startedAt: new Date(s.started_at).toISOString(),
        finishedAt: s.finished_at === null ? null : new Date(s.finished_at).toISOString(),
      })),
    };
  }

  /** A running command notices within one heartbeat (its lease check finds the run CANCELLED). */
  async cancel(id: string, reason = 'cancelled via API'): Promise<RunView> {
    const row = await this.transitions.transition(id, {
      to: RunStatus.CANCELLED,
      from: [RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RETRYING, RunStatus.RUNNING],
      set: ['finished_at = now()', 'lease_owner = NULL', 'lease_expires_at = NULL'],
      workerId: this.workerId,
      reason,
    });
    if (row) return toRunView(row);
    const current = await this.get(id);
    throw new RunsError(
      RunsErrorCode.RUN_NOT_CANCELLABLE,
      `run is ${current.status}; only PENDING, QUEUED, RETRYING or RUNNING runs can be cancelled`,
    );
  }
}
