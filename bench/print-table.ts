/** The printed table of a bench run (what latest.json holds, report.ts, laid out for a terminal). */
import type { BenchReport, Target } from './report';

const show = (v: number | null | undefined, digits = 0) => (v === null || v === undefined ? '—' : v.toFixed(digits));
/** At least `min` decimals, more where report.ts kept them (a value next to its goal). */
const decimals = (v: number | null, min: number) => Math.max(min, (String(v ?? '').split('.')[1] ?? '').length);
const cpuParts = (c: BenchReport['cpuMsPerGuardedRun']) =>
  c ? [c.worker, c.producer, c.postgres, c.redis].map((x) => show(x, 2)).join('+') : '—';

export function printTable(rep: BenchReport): void {
  const w = [50, 12, 8];
  const line = (a: string, b: string, c = '', d = '') =>
    `${a.padEnd(w[0])} ${b.padStart(w[1])}  ${c.padEnd(w[2])} ${d}`.trimEnd();
  const status = (t: Target) => (t.met === null ? 'not measured' : t.met ? 'met' : 'MISSED');
  const cpu = rep.cpuMsPerGuardedRun;
  const ml = rep.machineLoad;
  const load = (m: { busyShare: number | null; usPer: number | null } | null) =>
    m && m.busyShare !== null ? `${show(m.busyShare * 100)} % ${show(m.usPer)} µs` : '—';
  const out = [
    `onceflow bench, ${rep.date}: ${rep.machine.cpuModel}, ${rep.machine.cores} cores, ${rep.machine.memoryGb} GB, Node ${rep.machine.node}`,
    `Postgres ${rep.machine.postgres}, Redis ${rep.machine.redis}; worker concurrency ${rep.workerConcurrency}; phases ${rep.phases.join(',')}`,
    `load average before ${rep.machine.loadAverageBefore}, after ${rep.machine.loadAverageAfter}; took ${rep.totalSeconds} s`,
    '',
    line('figure', 'value', 'target', 'met?'),
    ...rep.targets.map((t) =>
      line(
        t.label,
        show(t.value, decimals(t.value, t.name === 'peakRssMb' || t.name === 'duplicatesExecuted' ? 0 : 2)),
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
      '  bare Bull with 2 consumer processes (÷ 1)',
      rep.bareBullTwoConsumers
        ? `${show(rep.bareBullTwoConsumers.jobsPerSec)} (${show(rep.bareBullTwoConsumers.ratio, 2)})`
        : '—',
    ),
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
      '  one kind alone: new items / retries / ceiling',
      rep.intakeByKind
        ? [rep.intakeByKind.newItems, rep.intakeByKind.retries, rep.intakeByKind.trivialRoute]
            .map((k) => show(k.perSec))
            .join(' / ')
        : '—',
    ),
    line(
      '    their API / Postgres CPU µs per request',
      rep.intakeByKind
        ? [rep.intakeByKind.newItems, rep.intakeByKind.retries, rep.intakeByKind.trivialRoute]
            .map((k) => `${show(k.apiUs)}/${show(k.postgresUs)}`)
            .join(' ')
        : '—',
    ),
    line(
      '    their machine CPU µs per request (busy %)',
      rep.intakeByKind
        ? [rep.intakeByKind.newItems, rep.intakeByKind.retries, rep.intakeByKind.trivialRoute]
            .map((k) => `${show(k.machineUs)} (${show(k.busyShare === null ? null : k.busyShare * 100)})`)
            .join(' ')
        : '—',
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
    'the whole machine: busy % of all cores, and its CPU µs per job, run or request',
    line('  bare Bull, 1 / 2 consumer processes', `${load(ml.bareBull)} / ${load(ml.bareBullTwoConsumers)}`),
    line('  guarded runs, 1 / 2 worker processes', ml.guarded.map(load).join(' / ') || '—'),
    line('  intake (80 % dup) / trivial-route ceiling', `${load(ml.intake)} / ${load(ml.intakeCeiling)}`),
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
