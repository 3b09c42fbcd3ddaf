import { BullModule, getQueueToken } from '@nestjs/bull';
import { Global, Module } from '@nestjs/common';
import type { Queue } from 'bull';
import { corkEachTurn } from '../common/turn-cork';
import { AppConfig } from '../config/app-config';
import { roleRunsWorkers } from '../config/roles';
import { APP_CONFIG } from '../config/config.module';
import { ALL_QUEUES } from './queue-names';
import { queueOptions } from './queue-settings';

/**
 * Where jobs are processed, each queue's command client holds its writes for the turn: a worker
 * finishing a group-committed batch of runs sends one `moveToFinished` per job in the same turn,
 * and they leave in one write instead of a system call each (docs/benchmarks.md, "One write per
 * turn for Bull, no async hooks in a worker"). Not in the API: its adds come one per request, so
 * there is nothing to share a write with, and each add would wait for the rest of the turn (~0.2 ms
 * measured under the open-loop intake, whose latency rose with it). Blocking and subscriber
 * connections are left alone.
 */
const QUEUE_WRITES_CORKED = {
  provide: Symbol('QUEUE_WRITES_CORKED'),
  inject: [APP_CONFIG, ...ALL_QUEUES.map((name) => getQueueToken(name))],
  useFactory: (config: AppConfig, ...queues: Queue[]) => {
    if (roleRunsWorkers(config.role)) for (const queue of queues) corkEachTurn(queue.client);
    return true;
  },
};

@Global()
@Module({
  imports: [
    BullModule.forRootAsync({ inject: [APP_CONFIG], useFactory: (config: AppConfig) => queueOptions(config) }),
    ...ALL_QUEUES.map((name) => BullModule.registerQueue({ name })),
  ],
  providers: [QUEUE_WRITES_CORKED],
  exports: [BullModule],
})
export class QueuesModule {}
