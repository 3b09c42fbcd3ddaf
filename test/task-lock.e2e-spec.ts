import { Process, Processor } from '@nestjs/bull';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DiscoveryModule } from '@nestjs/core';
import Redis from 'ioredis';
import { join } from 'node:path';
import { ProcessorGuardCheck, UnguardedProcessorError } from '../src/locks/processor-guard.check';
import { MetricsService } from '../src/metrics/metrics.service';
import { auth, closeDb, count, createProject, createRun, runStatus, startApp, TestApp, waitFor, waitForStatus } from './support/app';
import { tempDir, testEnv, testRedisUrl } from './support/env';

/** The TaskLockService interceptor really runs around the runs processor. */
describe('TaskLockService around the runs processor', () => {
  const countFile = join(tempDir('tasklock'), 'executions.log');
  let t: TestApp;
  let redis: Redis;
  const lockKey = (runId: string) => `${t.config.redisPrefix}:lock:run:${runId}`;

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
    expect(await redis.exists(lockKey(run.id))).toBe(0);
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
      async () => ((await t.app.get(MetricsService).lockAcquisitions.get()).values.find((v) => v.labels.result === 'busy')?.value ?? 0) > busyBefore,
      10_000,
      'a busy lock to be counted',
    );
    expect(await runStatus(run.id)).toBe('QUEUED');
    expect(count(countFile, 'start', run.id)).toBe(0);
    await waitForStatus([run.id], ['SUCCESS'], 20_000);
    expect(count(countFile, 'done', run.id)).toBe(1);
  });
});

@Injectable()
@Processor('unguarded')
class UnguardedProcessor {
  @Process()
  handle(): void {
    /* would run without the run lock */
  }
}

@Module({ imports: [DiscoveryModule], providers: [UnguardedProcessor, ProcessorGuardCheck] })
class RogueModule {}

describe('ProcessorGuardCheck', () => {
  it('refuses to boot with a bare @Process() handler', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [RogueModule] }).compile();
    await expect(moduleRef.init()).rejects.toThrow(UnguardedProcessorError);
    await moduleRef.close().catch(() => undefined);
  });
});
