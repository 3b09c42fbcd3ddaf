import { Injectable, OnModuleInit } from '@nestjs/common';
import { ScheduledTasks } from '../../scheduler/scheduled-tasks.service';
import { IdempotencyRepository } from './idempotency.repository';

export const IDEMPOTENCY_PRUNE_TASK = 'idempotency.prune';

/** Expired Idempotency-Keys are deleted on the scheduler's interval (one replica at a time). */
@Injectable()
export class IdempotencyPruner implements OnModuleInit {
  constructor(
    private readonly keys: IdempotencyRepository,
    private readonly scheduled: ScheduledTasks,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(IDEMPOTENCY_PRUNE_TASK, () => this.keys.pruneExpired());
  }
}
