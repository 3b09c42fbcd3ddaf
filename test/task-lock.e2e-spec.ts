import { Process, Processor } from '@nestjs/bull';
import { INestApplication, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import { join } from 'node:path';
import { AppModule } from '../src/app.module';
import { UnguardedProcessorError } from '../src/locks/processor-guard.check';
import { TaskLockService } from '../src/locks/task-lock.service';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { MetricsService } from '../src/metrics/metrics.service';
import {
  auth,
  closeDb,
  count,
  createProject,
  createRun,
  runStatus,
  startApp,
  TestApp,
  waitFor,
  waitForStatus,
} from './support/app';
import { tempDir, testConfig, testEnv, testRedisUrl } from './support/env';

/** The TaskLockService interceptor really runs around the runs processor. */
describe('TaskLockService around the runs processor', () => {
  const countFile = join(tempDir('tasklock'), 'executions.log');
  let t: TestApp;
  let redis: Redis;
  const lockKey = (runId: string) => `${t.config.redis.prefix}:lock:run:${runId}`;

  beforeAll(async () => {
    t = await startApp(testEnv('tasklock', countFile, { RUN_LOCK_TTL_MS: '3000' }));
    redis = new Redis(testRedisUrl());
  });
  afterAll(async () => {
    await t.close();
    await redis.quit();
    await closeDb();
  });

  it('holds lock:run:<id> while the command runs and frees it after', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'sleep=1', true);
    await waitFor(() => count(countFile, 'start', run.id) === 1, 10_000, 'the command to start');
    const owner = await redis.get(lockKey(run.id));
    expect(owner).toMatch(/:/);
    await waitForStatus([run.id], ['SUCCESS']);
    // Freed right after the finalize commits: SUCCESS can be read a moment before the release
    // lands, but an unreleased lock would live on for 2-3 s (its last renewal + the 3 s TTL).
    await waitFor(async () => (await redis.exists(lockKey(run.id))) === 0, 1500, 'the run lock to be freed');
  });

  it('skips a job whose run lock another worker holds, and runs it once that lock lapses', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'locked elsewhere');
    // Another worker holds the run (and then dies: its lock lapses after its TTL).
    await redis.set(lockKey(run.id), 'another-worker', 'PX', 2500);
    const before = await t.app.get(MetricsService).lockAcquisitions.get();
    const busyBefore = before.values.find((v) => v.labels.result === 'busy')?.value ?? 0;
    expect((await t.http.post(`/api/runs/${run.id}/dispatch`).set(auth)).status).toBe(202);
    await waitFor(
      async () =>
        ((await t.app.get(MetricsService).lockAcquisitions.get()).values.find((v) => v.labels.result === 'busy')
          ?.value ?? 0) > busyBefore,
      10_000,
      'a busy lock to be counted',
    );
    expect(await runStatus(run.id)).toBe('QUEUED');
    expect(count(countFile, 'start', run.id)).toBe(0);
    await waitForStatus([run.id], ['SUCCESS'], 20_000);
    expect(count(countFile, 'done', run.id)).toBe(1);
  });
});

/** What must never boot: a bare Bull handler on the real runs queue, beside the guarded one. */
@Injectable()
@Processor(RUNS_QUEUE)
class UnguardedProcessor {
  @Process()
  handle(): void {
    /* would run runs without the run lock */
  }
}

describe('ProcessorGuardCheck in the real AppModule', () => {
  const countFile = join(tempDir('rogue'), 'executions.log');

  /** AppModule.register(config) as main.ts builds it for `role`, with `extra` providers added to it. */
  async function boot(role: string, extra: Array<new (...args: never[]) => unknown>): Promise<INestApplication> {
    const config = testConfig(testEnv('rogue', countFile, { APP_ROLE: role }));
    const root = AppModule.register(config);
    const moduleRef = await Test.createTestingModule({
      imports: [{ ...root, providers: [...(root.providers ?? []), ...extra] }],
    }).compile();
    return moduleRef.createNestApplication();
  }

  it('refuses to boot with a bare @Process() provider added to it', async () => {
    // The api role registers no processor of its own: nothing but the check stands in the way
    // (in a worker role Bull itself would also object to a second default handler).
    const app = await boot('api', [UnguardedProcessor]);
    try {
      const refused = await app.init().then(
        () => null,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(UnguardedProcessorError);
      expect(String(refused)).toMatch(/UnguardedProcessor\.handle/);
    } finally {
      await app.close().catch(() => undefined);
    }
  });

  it('boots the same module without it: the real processors all go through TaskLockService', async () => {
    const app = await boot('worker', []);
    try {
      await app.init();
      expect(app.get(TaskLockService).guardedQueues.has(RUNS_QUEUE)).toBe(true);
    } finally {
      await app.close();
    }
  });
});
