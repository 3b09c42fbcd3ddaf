/** The shape of bench/results/latest.json, the targets of the speed issue, and the printed table. */
import type { BareBullResult } from './bare-bull';
import type { DispatchBenchResult } from './dispatch-bench';
import type { FullPathResult } from './full-path';
import type { GraphileResult } from './graphile-worker';
import type { GuardedResult } from './guarded-runs';
import type { LockBenchResult } from './lock-bench';
import type { OpenLoopResult } from './open-loop-intake';
import type { Machine, MachineCpu } from './support';
import { roundedByKind } from './intake-by-kind';
import type { IntakeResult } from './webhook-intake';

/** Every phase is optional (BENCH_PHASES): a figure whose phases did not run is null, its target "not measured". */
export interface BenchInputs {
  host: Machine;
  phases: string[];
  loadBefore: string;
  loadAfter: string;
  totalSeconds: number;
  concurrency: number;
  producers: number;
  /** Bare Bull no-op jobs before the peer's first run and after its second (the guarded phases' sandwich). */
  bare: BareBullResult[];
  /** Bare Bull whose handler takes and releases the job's run lock: the ladder's middle rung. */
  bareLocked?: BareBullResult;
  /** Bare Bull no-op jobs consumed by two processes: what a second process costs Bull alone. */
  bareTwoConsumers?: BareBullResult;
  /** Bare Bull forking the same command, measured before and after the full path (its baseline). */
  bareFork: BareBullResult[];
  /** graphile-worker before and after the guarded phase (the sandwich). */
  graphile: GraphileResult[];
  guarded: GuardedResult[];
  runsCreatedPerSec?: number;
  fullPath?: FullPathResult;
  locks?: LockBenchResult;
  intake?: IntakeResult;
  openLoop?: OpenLoopResult;
  dispatch?: DispatchBenchResult;
  producerPeakRssMb: number | null;
  /** The phase sizes this run used (the BENCH_* knobs): a small run is a correctness check, not a figure. */
  sizes: Record<string, number>;
}

export interface Target {
  name: string;
  label: string;
  value: number | null;
  goal: string;
  /** null: not measured in this run. */
  met: boolean | null;
}

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
const r = (n: number | null | undefined, digits = 0) =>
  n === null || n === undefined || !Number.isFinite(n) ? null : round(n, digits);
const div = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? null : a / b;
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);

/** Several runs of one bare Bull phase as one: rates and CPU per job averaged. */
function meanBare(runs: BareBullResult[]): BareBullResult | undefined {
  if (!runs.length) return undefined;
  const avg = (f: (b: BareBullResult) => number) => mean(runs.map(f))!;
  const workers = runs.map((b) => b.workerCpuMsPerJob);
  return {
    jobs: avg((b) => b.jobs),
    seconds: avg((b) => b.seconds),
    jobsPerSec: avg((b) => b.jobsPerSec),
    consumers: runs[0].consumers,
    workerPeakRssMb: Math.max(...runs.map((b) => b.workerPeakRssMb ?? 0)) || null,
    workerCpuMsPerJob: workers.includes(null) ? null : mean(workers as number[])!,
    producerCpuMsPerJob: avg((b) => b.producerCpuMsPerJob),
    redisCpuMsPerJob: avg((b) => b.redisCpuMsPerJob),
    machine: meanMachine(runs.map((b) => b.machine)),
    warmup: { jobs: avg((b) => b.warmup.jobs), jobsPerSec: meanOf(runs.map((b) => b.warmup.jobsPerSec)) ?? null },
  };
}

/** Windows of the machine's CPU as one: shares and busy ms averaged (null if any is unknown). */
function meanMachine(ms: Array<MachineCpu | null>): MachineCpu | null {
  if (!ms.length || ms.includes(null)) return null;
  const avg = (f: (m: MachineCpu) => number) => mean((ms as MachineCpu[]).map(f))!;
  return { busyShare: avg((m) => m.busyShare), stealShare: avg((m) => m.stealShare), busyMs: avg((m) => m.busyMs) };
}

/**
 * The whole machine in a phase: the share of its cores that was busy (every process and the
 * kernel) and the busy CPU µs per job, run or request served.
 */
function machineLoad(m: MachineCpu | null | undefined, served: number | undefined) {
  return m && served ? { busyShare: round(m.busyShare, 3), usPer: round((m.busyMs * 1000) / served) } : null;
}

/** CPU ms per job of a bare Bull phase, all processes (NaN when the consumers' is unknown). */
const bareCpuMsPerJob = (b: BareBullResult) =>
  (b.workerCpuMsPerJob ?? NaN) + b.producerCpuMsPerJob + b.redisCpuMsPerJob;

/** CPU ms per run of a guarded phase, by process, and their sum (null when a part is unknown). */
function cpuPerRun(g: GuardedResult) {
  const parts = {
    worker: g.workerCpuMsPerRun,
    producer: g.producerCpuMsPerRun,
    postgres: g.postgresCpuMsPerRun,
    redis: g.redisCpuMsPerRun,
  };
  const known = Object.values(parts).filter((x): x is number => x !== null);
  return { ...parts, total: known.length === 4 ? known.reduce((a, b) => a + b, 0) : null };
}

const rounded = (c: ReturnType<typeof cpuPerRun>) => ({
  worker: r(c.worker, 3),
  producer: r(c.producer, 3),
  postgres: r(c.postgres, 3),
  redis: r(c.redis, 3),
  total: r(c.total, 3),
});

/** The mean of the figures that were taken (a warm-up that did not run has none). */
const meanOf = (xs: Array<number | null>) => mean(xs.filter((x): x is number => x !== null));

function target(
  name: string,
  label: string,
  value: number | null,
  op: '>=' | '<=' | '=',
  goal: number,
  digits = 2,
): Target {
  const met = value === null ? null : op === '>=' ? value >= goal : op === '<=' ? value <= goal : value === goal;
  // A value that rounds onto the goal without reaching it keeps more digits: "0.25 >= 0.25 MISSED" would read as a bug.
  let d = digits;
  while (value !== null && d < 4 && r(value, d) === goal && value !== goal) d++;
  return { name, label, value: r(value, d), goal: `${op} ${goal}`, met };
}

export function buildReport(i: BenchInputs) {
  const [one, two] = i.guarded;
  const graphileMean = mean(i.graphile.map((g) => g.jobsPerSec));
  const cpu = one ? cpuPerRun(one) : null;
  const appRss = [
    ...i.guarded.flatMap((g) => g.workerPeakRssMb),
    i.intake?.serverPeakRssMb ?? null,
    i.openLoop?.serverPeakRssMb ?? null,
  ].filter((x): x is number => x !== null);
  const peakRssMb = appRss.length ? Math.max(...appRss) : null;
  const duplicatesExecuted =
    i.guarded.reduce((n, g) => n + g.duplicatesExecuted, 0) + (i.fullPath?.duplicatesExecuted ?? 0);
  const guarded = i.guarded.length > 0;
  // The mean of the runs before and after the guarded phases, as for the peer: a machine that
  // changes between them shows as a gap between the two, not as a skewed ratio.
  const bare = meanBare(i.bare);
  // The cost of each guarantee, side by side: the same jobs through bare Bull, then under the run
  // lock, then as guarded runs (Postgres state machine, fenced claim and finalize with the outbox
  // row, producer guard and conditional dispatch, every run dispatched twice).
  const bareRung = (label: string, b: BareBullResult | undefined) =>
    b && {
      label,
      perSec: r(b.jobsPerSec),
      cpuMs: {
        worker: r(b.workerCpuMsPerJob, 3),
        producer: r(b.producerCpuMsPerJob, 3),
        postgres: 0,
        redis: r(b.redisCpuMsPerJob, 3),
        total: r(bareCpuMsPerJob(b), 3),
      },
    };
  const guaranteeLadder = [
    bareRung('bare Bull, no guarantee', bare),
    bareRung('+ run lock (Redis, fencing token)', i.bareLocked),
    one &&
      cpu && {
        label: '+ Postgres state + producer guard (guarded)',
        perSec: r(one.runsPerSec),
        cpuMs: rounded(cpu),
      },
  ].filter((x) => !!x);
  const bareForkMean = i.bareFork.length
    ? i.bareFork.reduce((a, b) => a + b.jobsPerSec, 0) / i.bareFork.length
    : undefined;
  const targets: Target[] = [
    target('graphileRatio', 'guarded runs/s ÷ graphile-worker jobs/s', div(one?.runsPerSec, graphileMean), '>=', 3),
    target('guardRatio', 'guarded runs/s ÷ bare Bull no-op jobs/s', div(one?.runsPerSec, bare?.jobsPerSec), '>=', 0.25),
    target('cpuMsPerRun', 'CPU ms per guarded run, all processes', cpu?.total ?? null, '<=', 1.0),
    target('twoWorkerSpeedup', 'two worker processes ÷ one', div(two?.runsPerSec, one?.runsPerSec), '>=', 1.0),
    target(
      'fullPathRatio',
      'full path (fork sh -c true) ÷ bare Bull forking',
      div(i.fullPath?.runsPerSec, bareForkMean),
      '>=',
      0.5,
    ),
    target(
      'intakeCeilingRatio',
      'intake ÷ trivial-route ceiling (c=64, 80 % dup)',
      div(i.intake?.deliveriesPerSec, i.intake?.httpCeilingPerSec),
      '>=',
      0.6,
    ),
    target(
      'openLoopP99Ms',
      `intake p99 ms at an offered ${i.openLoop?.offeredPerSec ?? 500}/s (open loop)`,
      i.openLoop?.p99Ms ?? null,
      '<=',
      25,
      1,
    ),
    target('lockRatio', 'lock acquire+release ÷ raw SET NX + DEL', i.locks?.lockRatio ?? null, '>=', 0.8),
    target('peakRssMb', 'peak RSS of any app process (MB)', peakRssMb, '<=', 200, 0),
    target(
      'duplicatesExecuted',
      'duplicates executed (onceflow)',
      guarded || i.fullPath ? duplicatesExecuted : null,
      '=',
      0,
      0,
    ),
  ];
  return {
    date: new Date().toISOString(),
    machine: { ...i.host, loadAverageBefore: i.loadBefore, loadAverageAfter: i.loadAfter },
    phases: i.phases,
    sizes: i.sizes,
    executor: 'guarded phases: noop (RUN_EXECUTOR=noop); full path: shell, ORCHESTRATOR_COMMAND=true',
    workerConcurrency: i.concurrency,
    dispatchesInFlight: i.producers,
    bareBullJobsPerSec: r(bare?.jobsPerSec),
    bareBullJobsPerSecEach: i.bare.map((b) => round(b.jobsPerSec)),
    // The mean of the two, before and after the full path (a machine that changes between them
    // shows as a gap, not as a skewed ratio).
    bareBullForkJobsPerSec: r(bareForkMean),
    bareBullForkJobsPerSecEach: i.bareFork.map((b) => round(b.jobsPerSec)),
    bareBullLockedJobsPerSec: r(i.bareLocked?.jobsPerSec),
    // Bull alone with two consumer processes, against the mean with one: the two-worker target's
    // yardstick on this machine (a second process on the same cores costs Bull itself this much).
    bareBullTwoConsumers: i.bareTwoConsumers && {
      jobsPerSec: r(i.bareTwoConsumers.jobsPerSec),
      ratio: r(div(i.bareTwoConsumers.jobsPerSec, bare?.jobsPerSec), 2),
      cpuMsPerJob: r(bareCpuMsPerJob(i.bareTwoConsumers), 3),
    },
    guaranteeLadder,
    graphileJobsPerSec: i.graphile.map((g) => round(g.jobsPerSec)),
    graphileJobsPerSecMean: r(graphileMean),
    graphileDuplicatesExecuted: i.graphile.map((g) => g.duplicatesExecuted),
    graphileDuplicateShare: i.graphile.map((g) => round(g.duplicatesExecuted / g.jobs, 4)),
    guardedRunsPerSecOneWorker: r(one?.runsPerSec),
    guardedRunsPerSecTwoWorkers: r(two?.runsPerSec),
    runsCreatedPerSec: r(i.runsCreatedPerSec),
    fullPathRunsPerSec: r(i.fullPath?.runsPerSec),
    // The warm-ups' own rates: the same load through the same fresh processes before each clock
    // started (V8 still compiling, pools growing). Not a target; shown so the cold start is not hidden.
    coldStart: {
      guardedRunsPerSec: i.guarded.map((g) => r(g.warmup.runsPerSec)),
      bareBullJobsPerSec: r(meanOf(i.bare.map((b) => b.warmup.jobsPerSec))),
      fullPathRunsPerSec: r(i.fullPath?.warmup.runsPerSec),
      bareBullForkJobsPerSec: r(meanOf(i.bareFork.map((b) => b.warmup.jobsPerSec))),
      fullPathRatio: r(
        div(i.fullPath?.warmup.runsPerSec ?? undefined, meanOf(i.bareFork.map((b) => b.warmup.jobsPerSec))),
        2,
      ),
    },
    // CPU per run, steadier than rates on a shared machine: where a run's cost goes.
    cpuMsPerGuardedRun: cpu && rounded(cpu),
    // The same with two worker processes, and how many runs each claim and finalize statement
    // carried in either phase: why two processes on one machine cost more per run than one.
    cpuMsPerGuardedRunTwoWorkers: two ? rounded(cpuPerRun(two)) : null,
    runsPerStatement: i.guarded.map((g) => ({
      workers: g.workers,
      claims: r(g.claimsPerRoundTrip, 1),
      finalizes: r(g.finalizesPerStatement, 1),
    })),
    cpuMsPerBareJob: bare && {
      worker: r(bare.workerCpuMsPerJob, 3),
      producer: r(bare.producerCpuMsPerJob, 3),
      redis: r(bare.redisCpuMsPerJob, 3),
    },
    duplicatesExecuted,
    intakeDeliveriesPerSec: r(i.intake?.deliveriesPerSec),
    intakeP50Ms: r(i.intake?.all.p50Ms, 2),
    intakeP99Ms: r(i.intake?.all.p99Ms, 2),
    intakeHttpCeilingPerSec: r(i.intake?.httpCeilingPerSec),
    // One kind at a time through the same API process: where the mix's CPU goes.
    intakeByKind: i.intake ? roundedByKind(i.intake.byKind) : null,
    // The whole machine in each throughput phase: busy ~100 % means no CPU spare, so a rate ratio
    // is the inverse of the CPU per item, and a second process can only take from the others.
    machineLoad: {
      bareBull: machineLoad(bare?.machine, bare?.jobs),
      bareBullTwoConsumers: machineLoad(i.bareTwoConsumers?.machine, i.bareTwoConsumers?.jobs),
      guarded: i.guarded.map((g) => machineLoad(g.machine, g.runs)),
      intake: i.intake
        ? {
            busyShare: r(i.intake.machine.loaded?.busyShare, 3),
            usPer: r(i.intake.machine.loadedUs),
          }
        : null,
      intakeCeiling: i.intake
        ? {
            busyShare: r(i.intake.machine.ceiling?.busyShare, 3),
            usPer: r(i.intake.machine.ceilingUs),
          }
        : null,
    },
    openLoop: i.openLoop ?? null,
    // Dispatch alone (no execution): one run per call against up to 100 per call.
    dispatchRunsPerSec: i.dispatch && {
      single: r(i.dispatch.single.runsPerSec),
      bulk: r(i.dispatch.bulk.runsPerSec),
      batch: i.dispatch.bulk.batch,
      speedup: r(i.dispatch.speedup, 2),
    },
    lockOpsPerSec: r(i.locks?.lockOpsPerSec),
    rawRedisOpsPerSec: r(i.locks?.rawRedisOpsPerSec),
    peakRssMb,
    benchProcessPeakRssMb: i.producerPeakRssMb,
    totalSeconds: round(i.totalSeconds, 1),
    targets,
    details: {
      bareBull: i.bare,
      bareBullLocked: i.bareLocked,
      bareBullTwoConsumers: i.bareTwoConsumers,
      bareBullFork: i.bareFork,
      graphile: i.graphile,
      guarded: i.guarded,
      fullPath: i.fullPath,
      locks: i.locks,
      intake: i.intake,
      dispatch: i.dispatch,
    },
  };
}

export type BenchReport = ReturnType<typeof buildReport>;
