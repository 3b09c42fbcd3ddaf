import { Injectable, OnModuleInit } from '@nestjs/common';
import { ScheduledTasks } from '../../scheduler/scheduled-tasks.service';
import { LlmCacheRepository } from './llm-cache.repository';

export const LLM_CACHE_PRUNE_TASK = 'llm-cache.prune';

/** Expired LLM answers are deleted on the scheduler's interval (one replica at a time). */
@Injectable()
export class LlmCachePruner implements OnModuleInit {
  constructor(
    private readonly cache: LlmCacheRepository,
    private readonly scheduled: ScheduledTasks,
  ) {}

  onModuleInit(): void {
    this.scheduled.register(LLM_CACHE_PRUNE_TASK, () => this.cache.prune());
  }
}
