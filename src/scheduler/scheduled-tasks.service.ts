import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { AppConfig } from '../config/app-config';
import { roleRunsScheduler } from '../config/roles';
import { APP_CONFIG } from '../config/config.module';
import { LockService } from '../locks/lock.service';
import { LOCK_SERVICE } from '../locks/locks.tokens';

export type ScheduledTask = () => Promise<unknown>;

/**
 * Periodic checks (reaper, reconciler, notification sweeper, pruning). Modules register a task by
 * name; processes with the scheduler role run each one every RECONCILE_INTERVAL_MS, and a Redis
 * lock per task makes sure only ONE replica runs it at a time.
 */
@Injectable()
export class ScheduledTasks implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ScheduledTasks.name);
  private readonly tasks = new Map<string, ScheduledTask>();
  private readonly running = new Set<string>();
  private stopped = false;

  constructor(
    private readonly registry: SchedulerRegistry,
    @Inject(LOCK_SERVICE) private readonly locks: LockService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  register(name: string, task: ScheduledTask): void {
    if (this.tasks.has(name)) throw new Error(`scheduled task ${name} registered twice`);
    this.tasks.set(name, task);
  }

  names(): string[] {
    return [...this.tasks.keys()];
  }

  onApplicationBootstrap(): void {
    if (!roleRunsScheduler(this.config.role)) return;
    const timer = setInterval(() => void this.tick(), this.config.queue.reconcileIntervalMs);
    timer.unref();
    this.registry.addInterval('onceflow-scheduled-tasks', timer);
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    if (this.registry.doesExist('interval', 'onceflow-scheduled-tasks'))
      this.registry.deleteInterval('onceflow-scheduled-tasks');
  }

  /** Runs every task once (under its lock); also called directly by tests and the demo. */
  async tick(): Promise<void> {
    for (const name of this.tasks.keys()) {
      if (this.stopped) return;
      await this.runOnce(name);
    }
  }

  async runOnce(name: string): Promise<'ran' | 'busy'> {
    const task = this.tasks.get(name);
    if (!task) throw new Error(`no scheduled task ${name}`);
    if (this.running.has(name)) return 'busy';
    const lock = await this.locks
      .acquire(`scheduler:${name}`, Math.max(this.config.queue.reconcileIntervalMs * 2, 5000))
      .catch(() => null);
    if (!lock) return 'busy';
    this.running.add(name);
    try {
      await task();
    } catch (err) {
      this.logger.error({
        msg: 'scheduled task failed',
        task: name,
        err: err instanceof Error ? err.stack : String(err),
      });
    } finally {
      this.running.delete(name);
      await this.locks.release(lock).catch(() => undefined);
    }
    return 'ran';
  }
}
