/**
 * Dispatch alone: PENDING runs queued by the real services of an API-role app in this process (no
 * worker takes the jobs), one run per call (DispatchService, as `POST /api/runs/:id/dispatch`)
 * against calls of up to 100 runs (BulkDispatchService, as `POST /api/runs/dispatch`), with the
 * same number of calls in flight, after a warm-up of both. The clock covers the dispatch calls
 * only; afterwards each way is checked: every run answered QUEUED once, QUEUED in Postgres at
 * generation 1, its job in Redis.
 */
import type { INestApplication } from '@nestjs/common';
import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { DataSource } from 'typeorm';
import { createApp } from '../src/bootstrap';
import type { AppConfig } from '../src/config/app-config';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { BulkDispatchService } from '../src/runs/bulk-dispatch.service';
import { DispatchService } from '../src/runs/dispatch.service';
import { ProjectsService } from '../src/runs/projects/projects.service';
import { RunsService } from '../src/runs/runs.service';
import { createRuns } from './guarded-runs';
import { pool, serviceCpu } from './support';

export interface DispatchModeResult {
  runs: number;
  /** Runs per call: 1 for the single route. */
  batch: number;
  callsInFlight: number;
  seconds: number;
  runsPerSec: number;
  producerCpuMsPerRun: number;
  postgresCpuMsPerRun: number | null;
  redisCpuMsPerRun: number;
  /** Runs not answered QUEUED exactly once, not QUEUED at generation 1, or without their job. */
  mismatches: number;
}

export interface DispatchBenchResult {
  single: DispatchModeResult;
  bulk: DispatchModeResult;
  /** Bulk runs/s ÷ single runs/s. */
  speedup: number;
}

interface Setup {
  app: INestApplication;
  databaseUrl: string;
  redisUrl: string;
  callsInFlight: number;
}

async function measure(
  s: Setup,
  ids: string[],
  batch: number,
  call: (ids: string[]) => Promise<Array<{ runId: string; status?: string }>>,
): Promise<DispatchModeResult> {
  const batches = Array.from({ length: Math.ceil(ids.length / batch) }, (_, i) =>
    ids.slice(i * batch, (i + 1) * batch),
  );
  const answered = new Map<string, number>();
  const services = await serviceCpu(s.databaseUrl, s.redisUrl);
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  await pool(batches.length, s.callsInFlight, async (i) => {
    for (const item of await call(batches[i]))
      if (item.status === 'QUEUED') answered.set(item.runId, (answered.get(item.runId) ?? 0) + 1);
  });
  const seconds = (Date.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const { postgresMs, redisMs } = await services();
  const rows: Array<{ id: string }> = await s.app
    .get(DataSource)
    .query(`SELECT id FROM runs WHERE id = ANY($1) AND status = 'QUEUED' AND dispatch_generation = 1`, [ids]);
  const queue: Queue = s.app.get(getQueueToken(RUNS_QUEUE));
  const jobs = new Set((await queue.getJobs(['waiting'])).map((j) => String(j.id)));
  const good = new Set(rows.map((r) => r.id));
  const mismatches = ids.filter((id) => answered.get(id) !== 1 || !good.has(id) || !jobs.has(`run.${id}.g1`)).length;
  return {
    runs: ids.length,
    batch,
    callsInFlight: s.callsInFlight,
    seconds,
    runsPerSec: ids.length / seconds,
    producerCpuMsPerRun: (cpu.user + cpu.system) / 1000 / ids.length,
    postgresCpuMsPerRun: postgresMs === null ? null : postgresMs / ids.length,
    redisCpuMsPerRun: redisMs / ids.length,
    mismatches,
  };
}

export async function measureDispatch(
  config: AppConfig,
  databaseUrl: string,
  redisUrl: string,
  runs: number,
  batch: number,
  callsInFlight: number,
): Promise<DispatchBenchResult> {
  const app = await createApp(config);
  await app.init();
  try {
    const projects = app.get(ProjectsService);
    const creator = app.get(RunsService);
    const projectIds: string[] = [];
    for (let i = 0; i < 8; i++) projectIds.push((await projects.create({ name: `bench-dispatch-${i}` })).id);
    const create = (projectId: string, requirement: string) => creator.create({ projectId, requirement });
    const s: Setup = { app, databaseUrl, redisUrl, callsInFlight };
    const dispatcher = app.get(DispatchService);
    const bulkDispatcher = app.get(BulkDispatchService);
    const oneByOne = async ([id]: string[]) => [await dispatcher.dispatch(id)];
    const inBulk = async (ids: string[]) => (await bulkDispatcher.dispatch(ids)).items;
    // Both ways once before the clock (prepared statements, JIT, pool connections), so that the
    // way measured first does not pay for the warm-up alone.
    const warm = Math.min(500, Math.ceil(runs / 10));
    await measure(s, (await createRuns(create, projectIds, warm, callsInFlight)).ids, 1, oneByOne);
    await measure(s, (await createRuns(create, projectIds, warm, callsInFlight)).ids, batch, inBulk);
    const single = await measure(s, (await createRuns(create, projectIds, runs, callsInFlight)).ids, 1, oneByOne);
    const bulk = await measure(s, (await createRuns(create, projectIds, runs, callsInFlight)).ids, batch, inBulk);
    return { single, bulk, speedup: bulk.runsPerSec / single.runsPerSec };
  } finally {
    await app.close();
  }
}
