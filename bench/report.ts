/** The shape of bench/results/latest.json, the targets of the speed issue, and the printed table. */
import type { BareBullResult } from './bare-bull';
import type { DispatchBenchResult } from './dispatch-bench';
import type { FullPathResult } from './full-path';
import type { GraphileResult } from './graphile-worker';
import type { GuardedResult } from './guarded-runs';
import type { LockBenchResult } from './lock-bench';
import type { OpenLoopResult } from './open-loop-intake';
import type { Machine } from './support';
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

interface Target {
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
    workerPeakRssMb: Math.max(...runs.map((b) => b.workerPeakRssMb ?? 0)) || null,
    workerCpuMsPerJob: workers.includes(null) ? null : mean(workers as number[])!,
    producerCpuMsPerJob: avg((b) => b.producerCpuMsPerJob),
    redisCpuMsPerJob: avg((b) => b.redisCpuMsPerJob),
    warmup: { jobs: avg((b) => b.warmup.jobs), jobsPerSec: meanOf(runs.map((b) => b.warmup.jobsPerSec)) ?? null },
  };
}

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
  return { name, label, value: r(value, digits), goal: `${op} ${goal}`, met };
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
        total: r((b.workerCpuMsPerJob ?? NaN) + b.producerCpuMsPerJob + b.redisCpuMsPerJob, 3),
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

const show = (v: number | null | undefined, digits = 0) => (v === null || v === undefined ? '—' : v.toFixed(digits));
const cpuParts = (c: BenchReport['cpuMsPerGuardedRun']) =>
  c ? [c.worker, c.producer, c.postgres, c.redis].map((x) => show(x, 2)).join('+') : '—';

export function printTable(rep: BenchReport): void {
  const w = [50, 12, 8];
  const line = (a: string, b: string, c = '', d = '') =>
    `${a.padEnd(w[0])} ${b.padStart(w[1])}  ${c.padEnd(w[2])} ${d}`.trimEnd();
  const status = (t: Target) => (t.met === null ? 'not measured' : t.met ? 'met' : 'MISSED');
  const cpu = rep.cpuMsPerGuardedRun;
  const out = [
    `onceflow bench, ${rep.date}: ${rep.machine.cpuModel}, ${rep.machine.cores} cores, ${rep.machine.memoryGb} GB, Node ${rep.machine.node}`,
    `Postgres ${rep.machine.postgres}, Redis ${rep.machine.redis}; worker concurrency ${rep.workerConcurrency}; phases ${rep.phases.join(',')}`,
    `load average before ${rep.machine.loadAverageBefore}, after ${rep.machine.loadAverageAfter}; took ${rep.totalSeconds} s`,
    '',
    line('figure', 'value', 'target', 'met?'),
    ...rep.targets.map((t) =>
      line(
        t.label,
        show(t.value, t.name === 'peakRssMb' || t.name === 'duplicatesExecuted' ? 0 : 2),
        t.goal,
        status(t),
      ),
    ),
    '',
    line('bare Bull no-op jobs/s (mean)', show(rep.bareBullJobsPerSec)),
    line(
      '  before / after the guarded phases',
      rep.bareBullJobsPerSecEach.length ? rep.bareBullJobsPerSecEach.map((v) => show(v)).join(' / ') : '—',
    ),
    line('graphile-worker jobs/s (before / after)', rep.graphileJobsPerSec.map((x) => x.toFixed(0)).join(' / ') || '—'),
    line('  its duplicates executed twice (before / after)', rep.graphileDuplicatesExecuted.join(' / ') || '—'),
    line(
      'guarded runs/s (1 / 2 worker processes)',
      `${show(rep.guardedRunsPerSecOneWorker)} / ${show(rep.guardedRunsPerSecTwoWorkers)}`,
    ),
    line('  CPU ms/run worker+producer+pg+redis', cpuParts(cpu)),
    line('    the same, 2 worker processes', cpuParts(rep.cpuMsPerGuardedRunTwoWorkers)),
    line(
      '  runs per claim / finalize statement (1, 2)',
      rep.runsPerStatement.map((b) => `${show(b.claims, 1)} / ${show(b.finalizes, 1)}`).join(', ') || '—',
    ),
    line(
      'full path runs/s / bare Bull forking jobs/s',
      `${show(rep.fullPathRunsPerSec)} / ${show(rep.bareBullForkJobsPerSec)}`,
    ),
    line(
      '  bare Bull forking, before / after the full path',
      rep.bareBullForkJobsPerSecEach.length ? rep.bareBullForkJobsPerSecEach.map((v) => show(v)).join(' / ') : '—',
    ),
    line(`cold start (the ${rep.sizes.warmupPercent ?? 0} % warm-ups, not measured):`, ''),
    line(
      '  guarded runs/s (1 / 2 workers), bare Bull jobs/s',
      `${rep.coldStart.guardedRunsPerSec.map((v) => show(v)).join(' / ') || '—'}, ${show(rep.coldStart.bareBullJobsPerSec)}`,
    ),
    line(
      '  full path runs/s ÷ bare Bull forking jobs/s',
      `${show(rep.coldStart.fullPathRunsPerSec)} ÷ ${show(rep.coldStart.bareBullForkJobsPerSec)} = ${show(rep.coldStart.fullPathRatio, 2)}`,
    ),
    line(
      'intake deliveries/s / HTTP ceiling (c=64)',
      `${show(rep.intakeDeliveriesPerSec)} / ${show(rep.intakeHttpCeilingPerSec)}`,
    ),
    line(
      'open-loop intake p50 / p99 ms (new items p99)',
      rep.openLoop
        ? `${show(rep.openLoop.p50Ms, 1)} / ${show(rep.openLoop.p99Ms, 1)} (${show(rep.openLoop.newP99Ms, 1)})`
        : '—',
    ),
    line(
      '  worst second p99 / warm-up p99 ms',
      rep.openLoop ? `${show(rep.openLoop.worstSecondP99Ms, 1)} / ${show(rep.openLoop.warmupP99Ms, 1)}` : '—',
    ),
    line(
      'dispatch runs/s, one per call / in bulk',
      rep.dispatchRunsPerSec
        ? `${show(rep.dispatchRunsPerSec.single)} / ${show(rep.dispatchRunsPerSec.bulk)} (×${show(rep.dispatchRunsPerSec.speedup, 2)})`
        : '—',
    ),
    '',
    'the cost of each guarantee: per second, CPU ms per run (worker+producer+pg+redis = total)',
    ...(rep.guaranteeLadder.length
      ? rep.guaranteeLadder.map((g) =>
          line(`  ${g.label}`.slice(0, w[0]), show(g.perSec), '', `${cpuParts(g.cpuMs)} = ${show(g.cpuMs.total, 2)}`),
        )
      : ['  —']),
    '',
    'written to bench/results/latest.json and bench/results/latest.svg',
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}
