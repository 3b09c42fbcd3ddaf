/**
 * The guarded phases of the bench: fresh runs dispatched twice each by the real DispatchService
 * (an API-role app inside the bench process), executed by one worker process, then by two.
 */
import { DataSource } from 'typeorm';
import { createApp } from '../src/bootstrap';
import type { AppConfig } from '../src/config/app-config';
import { DispatchService } from '../src/runs/dispatch.service';
import { ProjectsService } from '../src/runs/projects/projects.service';
import { RunsService } from '../src/runs/runs.service';
import { createRuns, GuardedResult, measureGuarded } from './guarded-runs';
import { withPgStatements } from './pg-statements';
import { peakRssMb } from './support';

export interface GuardedPhasesOptions {
  /** The producer app's configuration (API role). */
  appConfig: AppConfig;
  /** The worker processes' environment (worker role). */
  workerEnv: Record<string, string>;
  databaseUrl: string;
  redisUrl: string;
  concurrency: number;
  producers: number;
  runsPerPhase: number;
  /** Runs of the one-worker phase's warm-up; the two-worker phase's is twice as many. */
  warmupRuns: number;
  /** BENCH_WORKER_PROFILE_DIR: a V8 CPU profile of every worker process, written when it stops. */
  profileDir: string | undefined;
  log: (msg: string) => void;
}

export interface GuardedPhases {
  guarded: GuardedResult[];
  runsCreatedPerSec: number;
  /** The bench process's (the producer's) peak RSS. */
  producerPeakRssMb: number | null;
}

export async function runGuardedPhases(o: GuardedPhasesOptions): Promise<GuardedPhases> {
  const { log } = o;
  // The producer: the real DispatchService in an API-role app inside this process.
  const app = await createApp(o.appConfig);
  try {
    await app.init();
    const ds = app.get(DataSource);
    const dispatcher = app.get(DispatchService);
    const runs = app.get(RunsService);
    const projects = app.get(ProjectsService);
    // Enough projects that the per-project row lock of the claim is not the whole story, and a
    // cap (max_concurrent_runs) that never binds: the bench measures the guards, not the cap.
    const projectIds: string[] = [];
    for (let i = 0; i < 32; i++) {
      projectIds.push((await projects.create({ name: `bench-${i}`, maxConcurrentRuns: o.concurrency * 2 })).id);
    }
    const create = (projectId: string, requirement: string) => runs.create({ projectId, requirement });
    const guarded: GuardedResult[] = [];
    let runsCreatedPerSec = 0;
    for (const workers of [1, 2]) {
      // Each worker process is warmed by as many runs as the single one: with the phase's share
      // split between two, each was measured with code V8 had not finished optimizing.
      const warm = await createRuns(create, projectIds, o.warmupRuns * workers, o.producers);
      const batch = await createRuns(create, projectIds, o.runsPerPhase, o.producers);
      runsCreatedPerSec = Math.max(runsCreatedPerSec, batch.perSec);
      log(
        `guarded runs, ${workers} worker process(es): ${o.runsPerPhase} runs created (${batch.perSec.toFixed(0)}/s), each dispatched twice at once`,
      );
      const g = await withPgStatements(o.databaseUrl, `guarded, ${workers} worker(s)`, log, () =>
        measureGuarded(
          {
            ds,
            dispatcher,
            databaseUrl: o.databaseUrl,
            redisUrl: o.redisUrl,
            workerEnv: o.workerEnv,
            workerNodeArgs: o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : [],
            producerConcurrency: o.producers,
          },
          batch.ids,
          workers,
          warm.ids,
        ),
      );
      log(
        `  ${g.runsPerSec.toFixed(0)} runs/s (warm-up ${g.warmup.runsPerSec?.toFixed(0) ?? '—'}), duplicates executed ${g.duplicatesExecuted}, not succeeded ${g.notSucceeded}, ${g.finalizesPerStatement.toFixed(2)} finalizes per statement, ${g.claimsPerRoundTrip.toFixed(2)} claims per round trip`,
      );
      guarded.push(g);
    }
    return { guarded, runsCreatedPerSec, producerPeakRssMb: peakRssMb(process.pid) };
  } finally {
    await app.close().catch(() => undefined);
  }
}
