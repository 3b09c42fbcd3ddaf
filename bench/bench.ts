/**
 * `npm run bench`: what the guarantees cost, measured in ONE run on this machine against the local
 * Postgres and Redis (DATABASE_URL's server, REDIS_URL), in a scratch database and under a Redis
 * key prefix of its own, both dropped at the end. Prints a table of the speed targets and writes
 * bench/results/latest.json and latest.svg. Method and figures: docs/benchmarks.md.
 *
 * Knobs (bench-only environment): BENCH_PHASES (comma list of bare, graphile, guarded, locks,
 * fullpath, intake, openloop, dispatch; default all), BENCH_CONCURRENCY (worker concurrency of every
 * consumer, default 32), BENCH_RUNS (runs per guarded phase, default 6000), BENCH_GW_JOBS
 * (graphile-worker jobs per phase, default BENCH_RUNS), BENCH_BARE_JOBS (default 20000),
 * BENCH_FULL_RUNS (full-path runs, and bare Bull forking jobs, default 2000), BENCH_PRODUCERS
 * (dispatches / adds / HTTP calls in flight, default 16), BENCH_OPEN_RATE (offered deliveries/s of
 * the open loop, default 500), BENCH_OPEN_SECONDS (its measured window, default 10), BENCH_OPEN_WARMUP
 * (seconds sent before that window, default 5; 0 measures from the first), BENCH_OPEN_TRACE (1: print
 * the open loop's timeline, bench/open-loop-trace.ts), BENCH_WORKER_PROFILE_DIR (V8 CPU
 * profiles of the worker processes, the full path's included), BENCH_FULL_TIMELINE (1: print the
 * full path's runs created / started / finished per half second), BENCH_DISPATCH_RUNS (runs dispatched
 * one per call, and as many again in bulk, default 10000), BENCH_DISPATCH_BATCH (runs per bulk call,
 * 1–100, default 100), BENCH_PG_STATEMENTS (1: what each guarded and intake phase's statements
 * cost Postgres, from pg_stat_statements, bench/pg-statements.ts). The dispatch phase runs last:
 * the runs it queues are never executed, and would be by a later phase's workers.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../src/config/app-config';
import { configFromProcessEnv, processEnvironment } from '../src/config/env';
import { prepareDatabase } from '../src/database/prepare-database';
import { BareBullResult, measureBareBull } from './bare-bull';
import { renderChart } from './chart';
import { FullPathResult, measureFullPath } from './full-path';
import { GraphileResult, measureGraphile } from './graphile-worker';
import { runGuardedPhases } from './guarded-phases';
import { LockBenchResult, measureLocks } from './lock-bench';
import { OpenLoopResult, runOpenLoopIntake } from './open-loop-intake';
import { withPgStatements } from './pg-statements';
import { printTable } from './print-table';
import { buildReport } from './report';
import { DispatchBenchResult, measureDispatch } from './dispatch-bench';
import { dropDatabase, dropRedisPrefix, load, machine, withDatabase } from './support';
import { formatIntake, IntakeResult, runIntakeBench } from './webhook-intake';

const API_KEY = 'bench-api-key-0123456789';

function knob(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`${name} must be a whole number of at least ${min}, got "${raw}"`);
  return n;
}

const ALL_PHASES = ['bare', 'graphile', 'guarded', 'locks', 'fullpath', 'intake', 'openloop', 'dispatch'];

function phasesToRun(): string[] {
  const raw = process.env.BENCH_PHASES;
  if (raw === undefined || raw.trim() === '') return ALL_PHASES;
  const picked = raw.split(',').map((p) => p.trim());
  const unknown = picked.filter((p) => !ALL_PHASES.includes(p));
  if (unknown.length)
    throw new Error(`BENCH_PHASES: unknown phase(s) ${unknown.join(', ')}; known: ${ALL_PHASES.join(', ')}`);
  return ALL_PHASES.filter((p) => picked.includes(p));
}

function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

async function main(): Promise<void> {
  const started = Date.now();
  const phases = phasesToRun();
  const has = (p: string) => phases.includes(p);
  const concurrency = knob('BENCH_CONCURRENCY', 32);
  const runsPerPhase = knob('BENCH_RUNS', 6000);
  const graphileJobs = knob('BENCH_GW_JOBS', runsPerPhase);
  const bareJobs = knob('BENCH_BARE_JOBS', 20000);
  const fullRuns = knob('BENCH_FULL_RUNS', 2000);
  const producers = knob('BENCH_PRODUCERS', 16);
  const openRate = knob('BENCH_OPEN_RATE', 500);
  const openSeconds = knob('BENCH_OPEN_SECONDS', 10);
  const openWarmup = knob('BENCH_OPEN_WARMUP', 5, 0);
  const dispatchRuns = knob('BENCH_DISPATCH_RUNS', 10000);
  const dispatchBatch = knob('BENCH_DISPATCH_BATCH', 100);
  const warmupPercent = knob('BENCH_WARMUP_PERCENT', 50, 0);
  const warmup = (n: number) => Math.round((n * warmupPercent) / 100);
  if (dispatchBatch > 100) throw new Error(`BENCH_DISPATCH_BATCH must be at most 100, got ${dispatchBatch}`);
  const profileDir = process.env.BENCH_WORKER_PROFILE_DIR;
  const tag = `bench_${Date.now().toString(36)}_${randomBytes(2).toString('hex')}`;
  const base = configFromProcessEnv({ API_KEYS: API_KEY });
  const databaseUrl = withDatabase(base.database.url, `onceflow_${tag}`);
  const workspaceRoot = mkdtempSync(join(tmpdir(), 'onceflow-bench-'));
  const appEnv: Record<string, string> = {
    ...(processEnvironment() as Record<string, string>),
    DATABASE_URL: databaseUrl,
    REDIS_URL: base.redis.url,
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
  log(
    `scratch database ${databaseUrl.replace(/\/\/[^@]*@/, '//')}, Redis prefix ${tag}, load ${loadBefore}, phases ${phases.join(',')}`,
  );
  try {
    const host = await machine(withDatabase(base.database.url, 'postgres'), base.redis.url);
    await prepareDatabase(databaseUrl);

    // Bare Bull before and after the guarded phases (and the peer around them), as the peer: the
    // guard ratio is against the mean, so a machine that slows down in between does not skew it.
    const bare: BareBullResult[] = [];
    const bareNoop = async (when: string) => {
      log(`bare Bull (${when}): ${bareJobs} no-op jobs, concurrency ${concurrency}, ${producers} adds in flight`);
      const b = await measureBareBull(config, bareJobs, producers, 'noop', warmup(bareJobs));
      log(`  ${b.jobsPerSec.toFixed(0)} jobs/s (warm-up ${b.warmup.jobsPerSec?.toFixed(0) ?? '—'})`);
      bare.push(b);
    };
    let bareLocked: BareBullResult | undefined;
    let bareTwoConsumers: BareBullResult | undefined;
    if (has('bare')) {
      await bareNoop('before');
      // The rung between bare Bull and a guarded run: the same jobs, each under its run lock.
      log(`bare Bull + run lock: ${bareJobs} jobs, each taking and releasing its run lock`);
      bareLocked = await measureBareBull(config, bareJobs, producers, 'lock', warmup(bareJobs));
      log(`  ${bareLocked.jobsPerSec.toFixed(0)} jobs/s`);
      // What a second process costs Bull alone on this machine: the yardstick of two workers ÷ one.
      // Each consumer is warmed by as many jobs as the single one was.
      log(`bare Bull, 2 consumer processes: ${bareJobs} no-op jobs, concurrency ${concurrency} each`);
      bareTwoConsumers = await measureBareBull(config, bareJobs, producers, 'noop', warmup(bareJobs) * 2, 2);
      log(`  ${bareTwoConsumers.jobsPerSec.toFixed(0)} jobs/s`);
    }

    // The peer before and after the guarded phases: a machine that slows down (a neighbour, heat)
    // between the two shows as a gap between its two figures instead of skewing the ratio.
    const graphile: GraphileResult[] = [];
    const peer = async (when: string) => {
      log(
        `graphile-worker (${when}): ${graphileJobs} jobs each added twice with one job_key, ${producers} pairs in flight, concurrency ${concurrency}`,
      );
      const g = await measureGraphile(
        databaseUrl,
        base.redis.url,
        graphileJobs,
        producers,
        concurrency,
        when,
        warmup(graphileJobs),
      );
      log(`  ${g.jobsPerSec.toFixed(0)} jobs/s, executed twice ${g.duplicatesExecuted}, never executed ${g.lost}`);
      graphile.push(g);
    };
    if (has('graphile')) await peer('before');

    const guardedPhases = has('guarded')
      ? await runGuardedPhases({
          appConfig: config,
          workerEnv: { ...appEnv, APP_ROLE: 'worker' },
          databaseUrl,
          redisUrl: base.redis.url,
          concurrency,
          producers,
          runsPerPhase,
          warmupRuns: warmup(runsPerPhase),
          profileDir,
          log,
        })
      : undefined;
    const guarded = guardedPhases?.guarded ?? [];
    if (has('graphile')) await peer('after');
    if (has('bare') && has('guarded')) await bareNoop('after');

    let locks: LockBenchResult | undefined;
    if (has('locks')) {
      log(`locks vs raw SET NX + DEL, ${64} in flight`);
      const l = (locks = await measureLocks(base.redis.url, tag, 64));
      const us = (side: 'lock' | 'raw') =>
        `client ${l.clientUsPerPair[side].toFixed(1)} + Redis ${l.redisUsPerPair[side].toFixed(1)} µs`;
      const raw = l.rawOpsPerSecByClient;
      log(
        `  ${l.lockOpsPerSec.toFixed(0)} pairs/s; raw ${raw.plain.toFixed(0)} plain, ${raw.autoPipelined.toFixed(0)} auto-pipelined, ${raw.corked.toFixed(0)} corked`,
      );
      log(`  ratio ${l.lockRatio.toFixed(2)}; CPU per pair: lock ${us('lock')}, raw ${us('raw')}`);
    }

    let fullPath: FullPathResult | undefined;
    const bareFork: BareBullResult[] = [];
    // The baseline before and after the full path, as the peer around the guarded phases: forking
    // rates swing with the machine (a neighbour, the page cache), and one sample skews the ratio.
    const forking = async (when: string) => {
      log(`bare Bull forking sh -c true (${when}): ${fullRuns} jobs, concurrency ${concurrency}`);
      const b = await measureBareBull(config, fullRuns, producers, 'fork', warmup(fullRuns));
      log(`  ${b.jobsPerSec.toFixed(0)} jobs/s (warm-up ${b.warmup.jobsPerSec?.toFixed(0) ?? '—'})`);
      bareFork.push(b);
    };
    if (has('fullpath')) {
      await forking('before');
      log(`full path: ${fullRuns} runs created + dispatched over HTTP, one worker forking sh -c true`);
      fullPath = await measureFullPath(
        appEnv,
        API_KEY,
        fullRuns,
        producers,
        profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
        process.env.BENCH_FULL_TIMELINE === '1',
        warmup(fullRuns),
      );
      log(
        `  ${fullPath.runsPerSec.toFixed(0)} runs/s (warm-up ${fullPath.warmup.runsPerSec?.toFixed(0) ?? '—'}), not succeeded ${fullPath.notSucceeded}, duplicates ${fullPath.duplicatesExecuted}`,
      );
      const { cpuMsPerRun: cpu, workerLoopDelayMs: lag } = fullPath;
      log(
        `  CPU ms per run: api ${cpu.api?.toFixed(2) ?? '—'}, worker ${cpu.worker?.toFixed(2) ?? '—'}, its command host ${cpu.host?.toFixed(2) ?? '—'}; worker event-loop delay p99 ${lag?.p99.toFixed(1) ?? '—'} ms, max ${lag?.max.toFixed(1) ?? '—'} ms`,
      );
      await forking('after');
    }

    let intake: IntakeResult | undefined;
    if (has('intake')) {
      log('webhook intake (closed loop, c=64)');
      intake = await withPgStatements(databaseUrl, 'the intake', log, () => runIntakeBench(appEnv));
      process.stderr.write(`${formatIntake(intake)}\n`);
    }
    // After the closed loop: that one checks one task per body it sent, in a database without tasks.
    let openLoop: OpenLoopResult | undefined;
    if (has('openloop')) {
      log(
        `webhook intake, open loop: ${openRate} deliveries/s offered for ${openWarmup} s of warm-up, then ${openSeconds} s measured`,
      );
      openLoop = await runOpenLoopIntake(
        appEnv,
        openRate,
        openSeconds,
        openWarmup,
        process.env.BENCH_OPEN_TRACE === '1',
      );
      for (const line of openLoop.timeline ?? []) log(`  ${line}`);
      log(
        `  p50 ${openLoop.p50Ms.toFixed(1)} ms, p99 ${openLoop.p99Ms.toFixed(1)} ms (new items ${openLoop.newP99Ms.toFixed(1)}, worst second ${openLoop.worstSecondP99Ms.toFixed(1)}), warm-up p99 ${openLoop.warmupP99Ms.toFixed(1)} ms, sent ${openLoop.sentPerSec.toFixed(0)}/s, errors ${openLoop.errors} ${JSON.stringify(openLoop.errorKinds)}`,
      );
    }

    let dispatch: DispatchBenchResult | undefined;
    if (has('dispatch')) {
      log(
        `dispatch: ${dispatchRuns} runs one per call, ${dispatchRuns} in calls of ${dispatchBatch}, ${producers} in flight`,
      );
      dispatch = await measureDispatch(config, databaseUrl, base.redis.url, dispatchRuns, dispatchBatch, producers);
      log(
        `  ${dispatch.single.runsPerSec.toFixed(0)} runs/s one per call, ${dispatch.bulk.runsPerSec.toFixed(0)} in bulk`,
      );
    }

    const report = buildReport({
      host,
      phases,
      loadBefore,
      loadAfter: load(),
      totalSeconds: (Date.now() - started) / 1000,
      concurrency,
      producers,
      bare,
      bareFork,
      bareLocked,
      bareTwoConsumers,
      graphile,
      guarded,
      runsCreatedPerSec: guardedPhases?.runsCreatedPerSec,
      fullPath,
      locks,
      intake,
      openLoop,
      dispatch,
      producerPeakRssMb: guardedPhases?.producerPeakRssMb ?? null,
      sizes: {
        runsPerPhase,
        graphileJobs,
        bareJobs,
        fullRuns,
        producers,
        openRate,
        openSeconds,
        openWarmup,
        dispatchRuns,
        dispatchBatch,
        warmupPercent,
      },
    });
    const dir = resolve(__dirname, '../../bench/results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(dir, 'latest.svg'), renderChart(report));
    printTable(report);
    // Exactly one of each pair of dispatches accepted, every run SUCCESS once with one outbox row.
    const broken =
      report.duplicatesExecuted > 0 ||
      guarded.some(
        (g) =>
          g.notSucceeded > 0 ||
          g.outboxMismatches > 0 ||
          g.dispatchAccepted !== g.runs ||
          g.warmup.dispatchAccepted !== g.warmup.runs,
      ) ||
      (fullPath !== undefined && fullPath.notSucceeded > 0) ||
      (dispatch !== undefined && dispatch.single.mismatches + dispatch.bulk.mismatches > 0) ||
      intake?.mismatch;
    if (broken) {
      process.exitCode = 1;
      process.stderr.write(`GUARANTEE VIOLATED: see latest.json (${intake?.mismatch ?? 'runs'})\n`);
    }
  } finally {
    await dropDatabase(databaseUrl).catch((err: unknown) => log(`could not drop the scratch database: ${String(err)}`));
    await dropRedisPrefix(base.redis.url, tag).catch((err: unknown) =>
      log(`could not delete Redis keys ${tag}:*: ${String(err)}`),
    );
    rmSync(workspaceRoot, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
