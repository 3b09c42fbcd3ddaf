import { AppProcess } from './app-process';
import { runScenario, Scenario, ScenarioReport } from './scenario';
import { freeze } from './scenarios/freeze';
import { kill9 } from './scenarios/kill9';
import { slack } from './scenarios/slack';
import { steps } from './scenarios/steps';
import { stores } from './scenarios/stores';
import { storm } from './scenarios/storm';

const SCENARIOS: Scenario[] = [storm, kill9, freeze, stores, slack, steps];

/**
 * `npm run chaos [-- --quick] [-- --only=kill9,freeze] [-- --seed=N | --seeds=N,M]`: each scenario
 * runs the real app as separate processes in its own database and Redis prefix, injects faults and
 * checks the exactly-once invariants from outside. Exits 1 on any violation. A run re-executed
 * because its worker died, froze or stalled between the command's exit and the commit is reported
 * apart (the at-least-once window, see docs/chaos.md); `--strict` counts those as violations too.
 * `--seeds` runs every chosen scenario once per seed (CI: a fixed one and a random one).
 */
function parseArgs(argv: string[]): { quick: boolean; strict: boolean; only?: string[]; seeds: number[] } {
  const quick = argv.includes('--quick');
  const strict = argv.includes('--strict');
  const only = argv
    .find((a) => a.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const value = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const listed = value('seeds') ?? value('seed') ?? process.env.CHAOS_SEED;
  const seeds = listed ? listed.split(',').map(Number) : [Math.floor(Math.random() * 1e9)];
  for (const seed of seeds) if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`bad seed ${seed}`);
  for (const name of only ?? []) if (!SCENARIOS.some((s) => s.name === name)) throw new Error(`no scenario ${name}`);
  return { quick, strict, only, seeds };
}

function printReport(r: ScenarioReport): void {
  const ok = r.violations.length === 0;
  process.stdout.write(`${ok ? 'PASS' : 'FAIL'} ${r.name} (${r.seconds}s)\n`);
  process.stdout.write(
    `  ${Object.entries(r.counts)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}\n`,
  );
  for (const w of r.warnings) process.stdout.write(`  warning: ${w}\n`);
  for (const w of r.windows) process.stdout.write(`  at-least-once window: ${w}\n`);
  for (const v of r.violations.slice(0, 20)) process.stdout.write(`  VIOLATION: ${v}\n`);
  if (r.violations.length > 20) process.stdout.write(`  … and ${r.violations.length - 20} more\n`);
  if (r.dir) process.stdout.write(`  evidence kept in ${r.dir} (evidence.log, executions.log, faults.log, logs/)\n`);
}

async function main(): Promise<void> {
  const { quick, strict, only, seeds } = parseArgs(process.argv.slice(2));
  const chosen = SCENARIOS.filter((s) => !only || only.includes(s.name));
  const t0 = Date.now();
  process.stdout.write(
    `onceflow chaos, ${quick ? 'quick' : 'full'}${strict ? ' strict' : ''} mode, seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')}: ${chosen.map((s) => s.name).join(', ')}\n`,
  );
  const reports: Array<ScenarioReport & { seed: number }> = [];
  for (const seed of seeds) {
    for (const s of chosen) {
      process.stdout.write(`\n== ${s.name} (seed ${seed}): ${s.summary}\n`);
      // Each scenario's own random stream depends on the seed and the scenario, not on which
      // others were chosen: `--only=<name> --seed=<seed>` replays the same choices.
      const report = await runScenario(s, quick, seed + SCENARIOS.indexOf(s), strict);
      printReport(report);
      reports.push({ ...report, seed });
    }
  }
  const failed = reports.filter((r) => r.violations.length > 0);
  process.stdout.write(
    `\n${'scenario'.padEnd(10)} ${'seed'.padStart(10)} ${'result'.padEnd(6)} ${'secs'.padStart(6)} ${'runs'.padStart(5)} ${'execs'.padStart(6)} ${'kills'.padStart(6)} ${'dups'.padStart(6)} ${'msgs'.padStart(5)} ${'window'.padStart(6)} ${'stalls'.padStart(6)}\n`,
  );
  for (const r of reports) {
    const c = r.counts;
    process.stdout.write(
      `${r.name.padEnd(10)} ${String(r.seed).padStart(10)} ${(r.violations.length ? 'FAIL' : 'PASS').padEnd(6)} ${String(r.seconds).padStart(6)} ${String(c.runs ?? '-').padStart(5)} ${String(c.executions ?? '-').padStart(6)} ${String(c.kills ?? 0).padStart(6)} ${String(c.duplicatesAnswered ?? 0).padStart(6)} ${String(c.messages ?? '-').padStart(5)} ${String((c.reexecuted ?? 0) + (c.slackRepeats ?? 0) + (c.stepWindows ?? 0)).padStart(6)} ${String(c.stalls ?? 0).padStart(6)}\n`,
    );
  }
  const replay = failed.map((r) => `npm run chaos -- ${quick ? '--quick ' : ''}--only=${r.name} --seed=${r.seed}`);
  process.stdout.write(
    `\n${failed.length ? `FAILED: ${failed.map((r) => `${r.name} (seed ${r.seed})`).join(', ')}` : 'all invariants held'} in ${((Date.now() - t0) / 1000).toFixed(0)} s (seed${seeds.length > 1 ? 's' : ''} ${seeds.join(', ')})\n`,
  );
  for (const line of [...new Set(replay)]) process.stdout.write(`  replay: ${line}\n`);
  process.exitCode = failed.length ? 1 : 0;
}

// Interrupted (Ctrl-C, a CI timeout): take down the processes we started, by pid, before leaving.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of AppProcess.live) child.kill('SIGKILL');
    process.stderr.write(
      `chaos: ${signal}: stopped ${AppProcess.live.size} app process(es); scratch databases onceflow_chaos_* may remain\n`,
    );
    process.exit(130);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
