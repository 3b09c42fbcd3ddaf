/** The shape of bench/results/latest.json, the targets of issue 6, and the printed table. */
import type { BareBullResult } from './bare-bull';
import type { GuardedResult } from './guarded-runs';
import type { LockBenchResult } from './lock-bench';
import type { Machine } from './support';
import type { IntakeResult } from './webhook-intake';

export interface BenchInputs {
  host: Machine;
  loadBefore: string;
  loadAfter: string;
  totalSeconds: number;
  concurrency: number;
  producers: number;
  bare: BareBullResult;
  guarded: GuardedResult[];
  runsCreatedPerSec: number;
  locks: LockBenchResult;
  intake: IntakeResult;
  producerPeakRssMb: number | null;
}

interface Target {
  name: string;
  value: number;
  goal: string;
  met: boolean;
}

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
const roundOrNull = (n: number | null, digits = 0) => (n === null ? null : round(n, digits));

export function buildReport(i: BenchInputs) {
  const [one, two] = i.guarded;
  const guardRatio = one.runsPerSec / i.bare.jobsPerSec;
  const appRss = [...i.guarded.flatMap((g) => g.workerPeakRssMb), i.intake.serverPeakRssMb].filter(
    (x): x is number => x !== null,
  );
  const peakRssMb = appRss.length ? Math.max(...appRss) : null;
  const duplicatesExecuted = i.guarded.reduce((n, g) => n + g.duplicatesExecuted, 0);
  const targets: Target[] = [
    { name: 'guardRatio', value: round(guardRatio, 2), goal: '>= 0.5', met: guardRatio >= 0.5 },
    { name: 'guardedRunsPerSec', value: round(one.runsPerSec), goal: '>= 1000', met: one.runsPerSec >= 1000 },
    {
      name: 'intakeDeliveriesPerSec',
      value: round(i.intake.deliveriesPerSec),
      goal: '>= 2000',
      met: i.intake.deliveriesPerSec >= 2000,
    },
    { name: 'intakeP99Ms', value: round(i.intake.all.p99Ms, 1), goal: '<= 25', met: i.intake.all.p99Ms <= 25 },
    { name: 'lockRatio', value: round(i.locks.lockRatio, 2), goal: '>= 0.8', met: i.locks.lockRatio >= 0.8 },
    { name: 'peakRssMb', value: peakRssMb ?? NaN, goal: '<= 250', met: peakRssMb !== null && peakRssMb <= 250 },
    { name: 'duplicatesExecuted', value: duplicatesExecuted, goal: '= 0', met: duplicatesExecuted === 0 },
  ];
  return {
    date: new Date().toISOString(),
    machine: { ...i.host, loadAverageBefore: i.loadBefore, loadAverageAfter: i.loadAfter },
    executor: 'noop (in-process, RUN_EXECUTOR=noop: no /bin/sh fork/exec)',
    workerConcurrency: i.concurrency,
    dispatchesInFlight: i.producers,
    bareBullJobsPerSec: round(i.bare.jobsPerSec),
    guardedRunsPerSec: round(one.runsPerSec),
    guardRatio: round(guardRatio, 3),
    guardedRunsPerSecOneWorker: round(one.runsPerSec),
    guardedRunsPerSecTwoWorkers: round(two.runsPerSec),
    twoWorkerSpeedup: round(two.runsPerSec / one.runsPerSec, 2),
    runsCreatedPerSec: round(i.runsCreatedPerSec),
    // CPU per run, steadier than rates on a shared machine: where a run's cost goes.
    cpuMsPerGuardedRun: {
      worker: roundOrNull(one.workerCpuMsPerRun, 3),
      producer: round(one.producerCpuMsPerRun, 3),
      postgres: roundOrNull(one.postgresCpuMsPerRun, 3),
      redis: round(one.redisCpuMsPerRun, 3),
    },
    cpuMsPerBareJob: {
      worker: roundOrNull(i.bare.workerCpuMsPerJob, 3),
      producer: round(i.bare.producerCpuMsPerJob, 3),
      redis: round(i.bare.redisCpuMsPerJob, 3),
    },
    duplicatesExecuted,
    intakeDeliveriesPerSec: round(i.intake.deliveriesPerSec),
    intakeP50Ms: round(i.intake.all.p50Ms, 2),
    intakeP99Ms: round(i.intake.all.p99Ms, 2),
    intakeHttpCeilingPerSec: round(i.intake.httpCeilingPerSec),
    lockOpsPerSec: round(i.locks.lockOpsPerSec),
    rawRedisOpsPerSec: round(i.locks.rawRedisOpsPerSec),
    lockRatio: round(i.locks.lockRatio, 3),
    peakRssMb,
    benchProcessPeakRssMb: i.producerPeakRssMb,
    totalSeconds: round(i.totalSeconds, 1),
    targets,
    details: { bareBull: i.bare, guarded: i.guarded, locks: i.locks, intake: i.intake },
  };
}

export type BenchReport = ReturnType<typeof buildReport>;

function cpuLine(parts: Record<string, number | null>): string {
  const v = Object.values(parts);
  return v.includes(null) ? '?' : `${v.map((x) => x!.toFixed(2)).join('+')}`;
}

export function printTable(r: BenchReport): void {
  const targets = new Map(r.targets.map((t) => [t.name, t]));
  // [label, value, name of the target it is checked against]
  const rows: Array<[string, string, string?]> = [
    ['bare Bull no-op jobs/s', r.bareBullJobsPerSec.toFixed(0)],
    ['guarded runs/s (1 worker process)', r.guardedRunsPerSecOneWorker.toFixed(0), 'guardedRunsPerSec'],
    ['guarded runs/s (2 worker processes)', r.guardedRunsPerSecTwoWorkers.toFixed(0)],
    ['guard ratio (guarded / bare)', r.guardRatio.toFixed(2), 'guardRatio'],
    ['  CPU ms/run (worker+producer+pg+redis)', cpuLine(r.cpuMsPerGuardedRun)],
    ['  CPU ms/bare job (worker+producer+redis)', cpuLine(r.cpuMsPerBareJob)],
    ['duplicates executed', String(r.duplicatesExecuted), 'duplicatesExecuted'],
    ['intake deliveries/s (c=64, 80 % dup)', r.intakeDeliveriesPerSec.toFixed(0), 'intakeDeliveriesPerSec'],
    ['intake p50 / p99 ms', `${r.intakeP50Ms.toFixed(1)} / ${r.intakeP99Ms.toFixed(1)}`, 'intakeP99Ms'],
    ['  HTTP ceiling (GET /health/live, c=64)', r.intakeHttpCeilingPerSec.toFixed(0)],
    ['lock acquire+release ops/s', r.lockOpsPerSec.toFixed(0)],
    ['raw SET NX + DEL ops/s', r.rawRedisOpsPerSec.toFixed(0)],
    ['lock ratio', r.lockRatio.toFixed(2), 'lockRatio'],
    ['peak RSS of an app process (MB)', String(r.peakRssMb ?? '?'), 'peakRssMb'],
  ];
  const w = [42, 20, 10];
  const cells = (label: string, value: string, key?: string): string => {
    const t = key ? targets.get(key) : undefined;
    return `${label.padEnd(w[0])} ${value.padStart(w[1])}  ${(t?.goal ?? '').padEnd(w[2])} ${t ? (t.met ? 'met' : 'MISSED') : ''}`.trimEnd();
  };
  const out = [
    `onceflow bench, ${r.date}: ${r.machine.cpuModel}, ${r.machine.cores} cores, ${r.machine.memoryGb} GB, Node ${r.machine.node}`,
    `Postgres ${r.machine.postgres}, Redis ${r.machine.redis}; executor ${r.executor}; worker concurrency ${r.workerConcurrency}`,
    `load average before ${r.machine.loadAverageBefore}, after ${r.machine.loadAverageAfter}; took ${r.totalSeconds} s`,
    '',
    `${'measure'.padEnd(w[0])} ${'value'.padStart(w[1])}  ${'target'.padEnd(w[2])} status`,
    ...rows.map(([label, value, key]) => cells(label, value, key)),
    '',
    'written to bench/results/latest.json',
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}
