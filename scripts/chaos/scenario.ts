import { Cluster, ClusterOptions } from './cluster';
import { checkInvariants, CheckInput } from './invariants';
import { rng } from './util';

export interface ScenarioContext {
  quick: boolean;
  rand: () => number;
  log: (msg: string) => void;
}

/** What a scenario hands back: its figures, and the inputs for the common invariant check. */
export interface ScenarioOutcome extends Partial<CheckInput> {
  counts: Record<string, number>;
  /** Violations only this scenario can see (e.g. a dispatch storm accepted twice). */
  violations?: string[];
  /** A check of the scenario's own, run once every run has settled (after the common invariants). */
  afterSettle?: () => Promise<{ violations: string[]; windows: string[]; counts: Record<string, number> }>;
}

export interface Scenario {
  name: string;
  summary: string;
  cluster: (quick: boolean) => Omit<ClusterOptions, 'name'>;
  run: (c: Cluster, ctx: ScenarioContext) => Promise<ScenarioOutcome>;
}

export interface ScenarioReport {
  name: string;
  seconds: number;
  counts: Record<string, number>;
  violations: string[];
  windows: string[];
  warnings: string[];
  dir?: string;
}

/** Starts the scenario's cluster, runs it, checks the invariants, tears everything down. */
export async function runScenario(s: Scenario, quick: boolean, seed: number, strict: boolean): Promise<ScenarioReport> {
  const t0 = Date.now();
  const log = (msg: string) => process.stdout.write(`  [${s.name} ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}\n`);
  let cluster: Cluster | undefined;
  const report: ScenarioReport = { name: s.name, seconds: 0, counts: {}, violations: [], windows: [], warnings: [] };
  try {
    cluster = await Cluster.start({ name: s.name, ...s.cluster(quick) });
    log(
      `cluster up: api + ${cluster.workers.length} workers + scheduler, db ${cluster.dbName}, prefix ${cluster.prefix}`,
    );
    const outcome = await s.run(cluster, { quick, rand: rng(seed), log });
    log('faults over; checking invariants');
    const verdict = await checkInvariants(cluster, { settleMs: quick ? 60_000 : 180_000, strict, ...outcome });
    const own = (await outcome.afterSettle?.()) ?? { violations: [], windows: [], counts: {} };
    report.counts = { ...verdict.counts, ...outcome.counts, ...own.counts, restarts: cluster.restarts };
    report.violations = [...(outcome.violations ?? []), ...verdict.violations, ...own.violations];
    report.windows = [...verdict.windows, ...own.windows];
    report.warnings = verdict.warnings;
  } catch (err) {
    report.violations.push(`scenario aborted: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  }
  const keep = report.violations.length > 0 || report.windows.length > 0 || !!process.env.CHAOS_KEEP_DIR;
  if (cluster) {
    if (keep) report.dir = cluster.dir;
    await cluster.destroy(keep).catch((err) => report.warnings.push(`cleanup: ${String(err)}`));
  }
  report.seconds = Math.round((Date.now() - t0) / 100) / 10;
  return report;
}
