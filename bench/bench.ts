/**
 * `npm run bench`: what the guarantees cost, measured in ONE run on this machine against the local
 * Postgres and Redis (DATABASE_URL's server, REDIS_URL), in a scratch database and under a Redis
 * key prefix of its own, both dropped at the end. Prints a table and writes
 * bench/results/latest.json. Method and figures: docs/benchmarks.md.
 *
 * Knobs (bench-only environment): BENCH_CONCURRENCY (worker concurrency of both the Bull baseline
 * and onceflow workers, default 32), BENCH_RUNS (runs per guarded phase, default 6000),
 * BENCH_BARE_JOBS (default 20000), BENCH_PRODUCERS (dispatches in flight, default 16),
 * BENCH_WORKER_PROFILE_DIR (V8 CPU profiles of the worker processes).
 */
import type { INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DataSource } from 'typeorm';
import { createApp } from '../src/bootstrap';
import { loadConfig } from '../src/config/app-config';
import { configFromProcessEnv, processEnvironment } from '../src/config/env';
import { prepareDatabase } from '../src/database/prepare-database';
import { DispatchService } from '../src/runs/dispatch.service';
import { ProjectsService } from '../src/runs/projects.service';
import { RunsService } from '../src/runs/runs.service';
import { measureBareBull } from './bare-bull';
import { createRuns, GuardedResult, measureGuarded } from './guarded-runs';
import { measureLocks } from './lock-bench';
import { buildReport, printTable } from './report';
import { dropDatabase, dropRedisPrefix, load, machine, peakRssMb, withDatabase } from './support';
import { formatIntake, runIntakeBench } from './webhook-intake';

const API_KEY = 'bench-api-key-0123456789';

function knob(name: string, fallback: number): number {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive whole number, got "${raw}"`);
  return n;
}

function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

async function main(): Promise<void> {
  const started = Date.now();
  const concurrency = knob('BENCH_CONCURRENCY', 32);
  const runsPerPhase = knob('BENCH_RUNS', 6000);
  const bareJobs = knob('BENCH_BARE_JOBS', 20000);
  const producers = knob('BENCH_PRODUCERS', 16);
  const profileDir = process.env.BENCH_WORKER_PROFILE_DIR;
  const tag = `bench_${Date.now().toString(36)}_${randomBytes(2).toString('hex')}`;
  const base = configFromProcessEnv({ API_KEYS: API_KEY });
  const databaseUrl = withDatabase(base.databaseUrl, `onceflow_${tag}`);
  const workspaceRoot = mkdtempSync(join(tmpdir(), 'onceflow-bench-'));
  const appEnv: Record<string, string> = {
    ...(processEnvironment() as Record<string, string>),
    DATABASE_URL: databaseUrl,
    REDIS_URL: base.redisUrl,
    REDIS_PREFIX: tag,
    API_KEYS: API_KEY,
    WORKSPACE_ROOT: workspaceRoot,
    LOG_LEVEL: 'silent',
    NODE_ENV: 'production',
    RUN_EXECUTOR: 'noop',
    WORKER_CONCURRENCY: String(concurrency),
  };
  for (const k of ['PLANE_WEBHOOK_SECRETS', 'SLACK_WEBHOOK_URL', 'APP_ROLE', 'PORT']) delete appEnv[k];
  const config = loadConfig({ ...appEnv, APP_ROLE: 'api' });
  const loadBefore = load();
  log(`scratch database ${databaseUrl.replace(/\/\/[^@]*@/, '//')}, Redis prefix ${tag}, load ${loadBefore}`);
  let app: INestApplication | undefined;
  try {
    const host = await machine(withDatabase(base.databaseUrl, 'postgres'), base.redisUrl);
    await prepareDatabase(databaseUrl);
    // The producer: the real DispatchService in an API-role app inside this process.
    app = await createApp(config);
    await app.init();
    const ds = app.get(DataSource);
    const dispatcher = app.get(DispatchService);
    const runs = app.get(RunsService);
    const projects = app.get(ProjectsService);

    log(`bare Bull: ${bareJobs} no-op jobs, concurrency ${concurrency}, ${producers} adds in flight`);
    const bare = await measureBareBull(config, bareJobs, producers);
    log(`  ${bare.jobsPerSec.toFixed(0)} jobs/s`);

    // Enough projects that the per-project row lock of the claim is not the whole story, and a
    // cap (max_concurrent_runs) that never binds: the bench measures the guards, not the cap.
    const projectIds: string[] = [];
    for (let i = 0; i < 32; i++) {
      projectIds.push((await projects.create({ name: `bench-${i}`, maxConcurrentRuns: concurrency * 2 })).id);
    }
    const create = (projectId: string, requirement: string) => runs.create({ projectId, requirement });
    const guarded: GuardedResult[] = [];
    let runsCreatedPerSec = 0;
    for (const workers of [1, 2]) {
      const batch = await createRuns(create, projectIds, runsPerPhase, producers);
      runsCreatedPerSec = Math.max(runsCreatedPerSec, batch.perSec);
      log(
        `guarded runs, ${workers} worker process(es): ${runsPerPhase} runs created (${batch.perSec.toFixed(0)}/s), each dispatched twice at once`,
      );
      const g = await measureGuarded(
        {
          ds,
          dispatcher,
          databaseUrl,
          redisUrl: base.redisUrl,
          workerEnv: { ...appEnv, APP_ROLE: 'worker' },
          // BENCH_WORKER_PROFILE_DIR: a V8 CPU profile of every worker process, written when it stops.
          workerNodeArgs: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
          producerConcurrency: producers,
        },
        batch.ids,
        workers,
      );
      log(
        `  ${g.runsPerSec.toFixed(0)} runs/s, duplicates executed ${g.duplicatesExecuted}, not succeeded ${g.notSucceeded}`,
      );
      guarded.push(g);
    }

    log(`locks vs raw SET NX + DEL, ${64} in flight`);
    const locks = await measureLocks(base.redisUrl, tag, 64);
    log(`  ratio ${locks.lockRatio.toFixed(2)}`);

    const producerPeakRssMb = peakRssMb(process.pid);
    await app.close();
    app = undefined;

    log('webhook intake');
    const intake = await runIntakeBench(appEnv);
    process.stderr.write(`${formatIntake(intake)}\n`);

    const report = buildReport({
      host,
      loadBefore,
      loadAfter: load(),
      totalSeconds: (Date.now() - started) / 1000,
      concurrency,
      producers,
      bare,
      guarded,
      runsCreatedPerSec,
      locks,
      intake,
      producerPeakRssMb,
    });
    const dir = resolve(__dirname, '../../bench/results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`);
    printTable(report);
    // Exactly one of each pair of dispatches accepted, every run SUCCESS once with one outbox row.
    const broken =
      report.duplicatesExecuted > 0 ||
      guarded.some((g) => g.notSucceeded > 0 || g.outboxMismatches > 0 || g.dispatchAccepted !== g.runs) ||
      intake.mismatch;
    if (broken) {
      process.exitCode = 1;
      process.stderr.write(`GUARANTEE VIOLATED: see latest.json (${intake.mismatch ?? 'runs'})\n`);
    }
  } finally {
    await app?.close().catch(() => undefined);
    await dropDatabase(databaseUrl).catch((err: unknown) => log(`could not drop the scratch database: ${String(err)}`));
    await dropRedisPrefix(base.redisUrl, tag).catch((err: unknown) =>
      log(`could not delete Redis keys ${tag}:*: ${String(err)}`),
    );
    rmSync(workspaceRoot, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
