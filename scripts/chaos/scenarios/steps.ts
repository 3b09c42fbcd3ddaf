import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster } from '../cluster';
import type { Scenario } from '../scenario';
import { checkSteps } from '../steps-check';
import { pick, sleep, waitFor } from '../util';
import { parseLine } from '../witness';

const CONCURRENCY = 4;

/**
 * Multi-step runs (four `onceflow step`s, step 2 asks the LLM through the worker's caching proxy)
 * while workers are killed with -9 (and restarted) and frozen past their lock TTL. Each step's
 * effect must happen exactly once — a step in flight at a kill may run again, reported with its
 * evidence as a window — and the LLM provider must see one call per prompt, plus at most one per
 * command a fault caught in flight. Every round must land its fault on a worker running commands.
 */
export const steps: Scenario = {
  name: 'steps',
  summary: 'multi-step runs with an LLM call each, under kill -9 and freezes (steps journal, LLM cache)',
  cluster: () => ({ workers: 3, env: { WORKER_CONCURRENCY: String(CONCURRENCY) } }),
  async run(c, { quick, rand, log }) {
    const project = await c.client.createProject(12);
    const runIds: string[] = [];
    const violations: string[] = [];
    const rounds = quick ? 5 : 15;
    let kills = 0;
    let freezes = 0;
    let busyFaults = 0;
    const restarts: Promise<void>[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (let i = 0; i < 5; i++) {
        const pace = (0.2 + rand() * 0.4).toFixed(1);
        runIds.push(await c.client.createRun(project, `chaos steps run ${round}.${i} steps=4 pace=${pace} llm`, true));
      }
      // Into the round's runs while they are in flight (four steps of 0.2-0.6 s each): a longer
      // wait let every one of them finish first, and the fault landed on no command.
      await sleep(300 + rand() * 1200);
      const busy = await waitFor(() => c.busyWorkers().length > 0, 10_000, 'a worker running commands').then(
        () => c.busyWorkers(),
        () => [],
      );
      if (busy.length === 0) {
        violations.push(`round ${round}: no worker was running a command within 10 s; no fault landed`);
        continue;
      }
      const victim = pick(rand, busy).worker;
      if (round % 3 === 0) {
        const held = c.freeze(victim);
        freezes++;
        if (held > 0) busyFaults++;
        log(
          `round ${round}: SIGSTOP ${victim.label} (pid ${victim.pid}, ${held} command(s) alive) for ${3 * c.lockTtlMs} ms`,
        );
        await sleep(3 * c.lockTtlMs);
        c.thaw(victim);
      } else {
        const pid = victim.pid;
        const held = await c.kill(victim);
        kills++;
        if (held > 0) busyFaults++;
        log(`round ${round}: kill -9 ${victim.label} (pid ${pid}, ${held} command(s) alive)`);
        restarts.push(sleep(500 + rand() * 1000).then(() => c.restart(victim)));
      }
    }
    await Promise.all(restarts);
    if (busyFaults * 2 <= kills + freezes)
      violations.push(`only ${busyFaults} of ${kills + freezes} faults hit a worker running commands`);
    return {
      counts: { runsCreated: runIds.length, kills, freezes, busyFaults },
      violations,
      afterSettle: () => checkStepsOf(c),
    };
  },
};

async function checkStepsOf(
  c: Cluster,
): Promise<{ violations: string[]; windows: string[]; counts: Record<string, number> }> {
  const { rows: runs } = await c.pg.query<{ id: string; status: string; requirement: string }>(
    `SELECT id, status, requirement FROM runs WHERE requirement LIKE '%steps=%'`,
  );
  const lines = existsSync(c.stepsFile)
    ? readFileSync(c.stepsFile, 'utf8')
        .split('\n')
        .map(parseLine)
        .filter((l): l is NonNullable<typeof l> => l !== null)
    : [];
  const faults = c.allFaults();
  // A fault can catch each command of its worker in the middle of its LLM call: one call more each.
  const inFlight = faults.reduce(
    (n, f) =>
      n + (f.kind === 'kill' || f.kind === 'freeze' ? (f.held ?? CONCURRENCY) : f.kind === 'stall' ? CONCURRENCY : 0),
    0,
  );
  const { findings, counts } = checkSteps({
    runs,
    lines,
    executions: c.witness.executions,
    faults,
    workers: c.workerPids(),
    lockTtlMs: c.lockTtlMs,
    llmPrompts: c.llm.calls.map((call) => JSON.stringify(call.body.messages ?? null)),
    llmCallsInFlightBound: inFlight,
  });
  const evidence = join(c.dir, 'evidence.log');
  for (const f of findings) {
    const own = lines.filter((l) => l.runId === f.runId).map((l) => `  step line ${JSON.stringify(l)}`);
    appendFileSync(
      evidence,
      `${f.kind === 'window' ? 'at-least-once window (step): ' : ''}${f.message}\n${own.join('\n')}\n`,
    );
  }
  return {
    violations: findings.filter((f) => f.kind === 'violation').map((f) => f.message),
    windows: findings.filter((f) => f.kind === 'window').map((f) => f.message),
    counts: { ...counts, stepWindows: findings.filter((f) => f.kind === 'window').length },
  };
}
