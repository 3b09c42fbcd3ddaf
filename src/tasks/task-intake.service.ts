import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DataSource, EntityManager } from 'typeorm';
import { randomUUID } from 'node:crypto';
import type { NamedStatement } from '../database/named-params';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { TimeoutError, withTimeout } from '../common/with-timeout';
import { pgConstraint, pgErrorCode } from '../database/pg-errors';
import { UX_RUNS_TASK_AUTHORING } from '../runs/entities/run.entity';
import { RunKind, RunStatus } from '../runs/run-status';
import { RunTransitionsRepository } from '../runs/run-transitions.repository';
import { RunsService } from '../runs/runs.service';
import { UX_TASKS_EXTERNAL_REF } from './task.entity';
import { ExternalProjectRef, TaskFields, TasksRepository } from './tasks.repository';

/** An external work item as the intake needs it, whatever the provider. */
export interface ExternalWorkItem {
  provider: string;
  externalId: string;
  project: Omit<ExternalProjectRef, 'provider'>;
  title: string;
  url: string | null;
  metadata: Record<string, unknown> & { updatedAt?: string | null };
  requirement: string;
}

export type OpenResult =
  | { kind: 'created'; taskId: string; runId: string; projectId: string }
  | { kind: 'exists'; taskId: string; runId: string | null };

export type CloseResult =
  { kind: 'closed'; taskId: string; runId: string | null; runCancelled: boolean } | { kind: 'not_found' };

/**
 * Extra work the caller wants committed atomically with a new task (e.g. marking its delivery):
 * a data-modifying CTE of the statement that creates it, over `run` (the new run: `id`, `task_id`).
 */
export type WithinCreate = (run: string) => NamedStatement;

/** Unique constraints whose violation means "someone else created it first": a result, not a 500. */
const BUSINESS_KEYS = new Set([UX_TASKS_EXTERNAL_REF, UX_RUNS_TASK_AUTHORING]);

/**
 * The enqueue is best effort: the run is QUEUED in Postgres and the reconciler enqueues it if we
 * don't. It is not waited for (see open), but a graceful stop waits this long for it.
 */
const ENQUEUE_BUDGET_MS = 2000;

/**
 * One task and one authoring run per external work item, however often and however concurrently
 * it is announced. Cheap read first (a known item costs one SELECT); otherwise ONE statement
 * inserts the task (`ON CONFLICT DO NOTHING` decides the single winner), its run, the run's event
 * and the caller's extra work. A known project: its id (one prepared SELECT) and that statement,
 * prepared, on its own. A project seen for the first time: both in a transaction that creates it.
 *
 * No workspace is made here: the task's is `<root>/<project id>/tasks/<task id>`, a path fixed by
 * the one task, and the worker makes it (under the workspace guard, owned by the run's user) when
 * the run's first attempt starts. So a delivery's answer waits for no file system (a shared
 * volume, for the API, is a network round trip per call), a loser of the race has nothing to
 * clean up, and an item closed before its run started never gets a directory.
 */
@Injectable()
export class TaskIntakeService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(TaskIntakeService.name);
  /** Enqueues of created runs still under way: a graceful stop lets them finish first. */
  private readonly enqueues = new Set<Promise<void>>();

  constructor(
    @InjectDataSource() private readonly ds: DataSource,
    private readonly tasks: TasksRepository,
    private readonly runs: RunsService,
    private readonly transitions: RunTransitionsRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * `probablyNew` (e.g. a `created` event) skips the cheap read: the insert decides anyway, and for
   * an item seen for the first time the read is a wasted round trip.
   */
  async open(item: ExternalWorkItem, within?: WithinCreate, probablyNew = false): Promise<OpenResult> {
    return this.openOnce(item, within, probablyNew, true);
  }

  private async openOnce(
    item: ExternalWorkItem,
    within: WithinCreate | undefined,
    probablyNew: boolean,
    mayRetry: boolean,
  ): Promise<OpenResult> {
    if (!probablyNew) {
      const known = await this.findAndRefresh(item);
      if (known) return { kind: 'exists', ...known };
    }
    const taskId = randomUUID();
    const create = (projectId: string, em?: EntityManager) => {
      const task = { id: taskId, projectId, provider: item.provider, fields: taskFields(item) };
      const run = this.runs.creationCte('task', {
        requirement: item.requirement,
        kind: RunKind.AUTHORING,
        dispatch: true,
      });
      return this.tasks.insertWithRun(task, run, within?.('run'), em);
    };
    try {
      const projectId = await this.tasks.projectIdOf(item.provider, item.project.externalId);
      const run = projectId
        ? await create(projectId)
        : await this.ds.transaction(async (em) => create(await this.ensureProject(em, item), em));
      if (!run) {
        // A concurrent intake committed the task first: it owns the run.
        const known = await this.findAndRefresh(item);
        if (known) return { kind: 'exists', ...known };
        // Neither inserted nor found: the project's row is gone (the id may be one this process remembered).
        if (!projectId || !mayRetry) throw neitherInsertedNorFound(item);
        this.tasks.forgetProjectId(item.provider, item.project.externalId, projectId);
        return await this.openOnce(item, within, probablyNew, false);
      }
      // Answered without waiting for the job: what the answer promises is the committed QUEUED run,
      // and a lost add is the reconciler's. The enqueue's round trips (the producer guard, Bull's
      // add) were ~1 of a new item's ~6 ms in the API at 500 deliveries/s (docs/benchmarks.md).
      this.enqueueInBackground(run);
      return { kind: 'created', taskId, runId: run.id, projectId: run.project_id };
    } catch (err) {
      if (pgErrorCode(err) === '23505' && BUSINESS_KEYS.has(pgConstraint(err) ?? '')) return this.existing(item);
      throw err;
    }
  }

  /**
   * The project of a provider's project seen for the first time, created in the caller's
   * transaction, with the directory its task workspaces go in made now, by us: a project-level
   * run's command will own `<root>/<id>`, and must not be the one to decide what `tasks` is.
   */
  private async ensureProject(em: EntityManager, item: ExternalWorkItem): Promise<string> {
    const root = this.config.runs.workspaceRoot;
    const { id } = await this.tasks.ensureProject(em, root, { provider: item.provider, ...item.project });
    await mkdir(join(root, id, 'tasks'), { recursive: true });
    return id;
  }

  /** Marks the task cancelled and cancels its authoring run if that has not started yet. */
  async close(provider: string, externalId: string, reason: string): Promise<CloseResult> {
    return this.ds.transaction(async (em) => {
      const taskId = await this.tasks.lockByExternalRef(em, provider, externalId);
      if (!taskId) return { kind: 'not_found' as const };
      await this.tasks.markCancelled(em, taskId);
      const runId = await this.tasks.authoringRunId(em, taskId);
      // Only a run that has not started: a running or finished one is left to finish as it will.
      const cancelled = runId
        ? await this.transitions.transition(
            runId,
            {
              to: RunStatus.CANCELLED,
              from: [RunStatus.PENDING, RunStatus.QUEUED],
              set: ['finished_at = now()', 'lease_owner = NULL', 'lease_expires_at = NULL'],
              reason,
            },
            em,
          )
        : null;
      return { kind: 'closed' as const, taskId, runId, runCancelled: cancelled !== null };
    });
  }

  /** Lost the race to a concurrent intake: read its committed task (and let our event refresh it). */
  private async existing(item: ExternalWorkItem): Promise<OpenResult> {
    const known = await this.findAndRefresh(item);
    if (!known) throw neitherInsertedNorFound(item);
    return { kind: 'exists', ...known };
  }

  /** The item's task and authoring run, if it has them, refreshed by this event (see TasksRepository). */
  private async findAndRefresh(item: ExternalWorkItem): Promise<{ taskId: string; runId: string | null } | null> {
    return this.tasks.findAndRefresh(item.provider, taskFields(item), item.metadata.updatedAt || null);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all([...this.enqueues]);
  }

  private enqueueInBackground(run: Parameters<RunsService['enqueueAfterCommit']>[0]): void {
    const done: Promise<void> = this.enqueue(run).finally(() => this.enqueues.delete(done));
    this.enqueues.add(done);
  }

  /** Never rejects: a slow or failed enqueue is logged and left to the reconciler. */
  private async enqueue(run: Parameters<RunsService['enqueueAfterCommit']>[0]): Promise<void> {
    try {
      await withTimeout(this.runs.enqueueAfterCommit(run), ENQUEUE_BUDGET_MS, 'the enqueue');
    } catch (err) {
      if (err instanceof TimeoutError)
        this.logger.warn({ msg: 'enqueue is slow; answering anyway (the run is QUEUED in Postgres)', runId: run.id });
      else
        this.logger.warn({
          msg: 'enqueue after commit failed; the reconciler will enqueue the run',
          runId: run.id,
          err: String(err),
        });
    }
  }
}

function neitherInsertedNorFound(item: ExternalWorkItem): Error {
  return new Error(`task ${item.provider}:${item.externalId} neither inserted nor found`);
}

function taskFields(item: ExternalWorkItem): TaskFields {
  return [item.externalId, item.url, item.title, item.metadata];
}
