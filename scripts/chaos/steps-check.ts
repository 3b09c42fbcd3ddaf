import type { Fault } from './cluster';
import { explainAt, Finding } from './execution-check';
import { ExecLine, Execution } from './witness';

export interface StepRun {
  id: string;
  status: string;
  requirement: string;
}

export interface StepFacts {
  runs: StepRun[];
  /** What the steps themselves appended (steps.log): stepbegin and effect lines. */
  lines: ExecLine[];
  /** The runs' executions (executions.log): which worker ran which attempt, from the commands' own records. */
  executions: Execution[];
  faults: Fault[];
  workers: Map<number, string>;
  lockTtlMs: number;
  /** LLM calls the stand-in provider received: the prompt of each. */
  llmPrompts: string[];
  /** Commands a fault could have caught in the middle of an LLM call: each may cost one call more. */
  llmCallsInFlightBound: number;
}

const stepOf = (l: ExecLine) => l.fields.step ?? '?';

/** How many steps a run was built with (the steps orchestrator's rule: steps=N, 4 by default). */
export function stepCount(requirement: string): number {
  const m = /steps=(\d+)/.exec(requirement);
  return m ? Number(m[1]) : 4;
}

/**
 * Steps, from the steps' own lines and the OS only: each step of a finished run had its effect,
 * exactly once — a second effect is explained only by a kill, freeze or stall of the worker whose
 * attempt had the first one, right after it (the step in flight: its effect happened, its record
 * did not) — and no effect comes from an attempt after a newer attempt of its run had started (a
 * zombie). The LLM provider saw at most one call per distinct prompt, plus the calls a fault could
 * have caught in flight.
 */
export function checkSteps(f: StepFacts): { findings: Finding[]; counts: Record<string, number> } {
  const findings: Finding[] = [];
  const counts = {
    stepEffects: 0,
    stepRepeats: 0,
    stepsReplayedOrSkipped: 0,
    llmCalls: f.llmPrompts.length,
    llmPrompts: 0,
  };
  const execsOf = new Map<string, Execution[]>();
  for (const e of f.executions) execsOf.set(e.start.runId, [...(execsOf.get(e.start.runId) ?? []), e]);
  for (const run of f.runs) {
    const bad = (message: string) =>
      findings.push({ runId: run.id, kind: 'violation', message: `run ${run.id}: ${message}` });
    const execs = execsOf.get(run.id) ?? [];
    const effects = f.lines.filter((l) => l.runId === run.id && l.kind === 'effect').sort((a, b) => a.atMs - b.atMs);
    counts.stepEffects += effects.length;
    const begun = f.lines.filter((l) => l.runId === run.id && l.kind === 'stepbegin');
    const attempts = new Set(execs.map((e) => e.start.token)).size;
    counts.stepsReplayedOrSkipped += Math.max(0, attempts * stepCount(run.requirement) - begun.length);
    for (let i = 1; i <= stepCount(run.requirement); i++) {
      const step = `s${i}`;
      const mine = effects.filter((l) => stepOf(l) === step);
      if (run.status === 'SUCCESS' && mine.length === 0)
        bad(`step ${step} never had its effect, yet the run is SUCCESS`);
      // Every effect but the last must have been lost to a fault of its own worker right after it.
      for (const earlier of mine.slice(0, -1)) {
        counts.stepRepeats++;
        const exec = execs.find((e) => e.start.token === earlier.token);
        const who = `attempt ${earlier.attempt}'s worker ${exec?.worker ? `${f.workers.get(exec.worker) ?? 'unknown'} (pid ${exec.worker})` : '(unknown)'}`;
        const why = exec?.worker
          ? explainAt(
              exec.worker,
              earlier.atMs,
              who,
              { what: `step ${step}'s effect`, around: `step ${step}'s effect` },
              f,
            )
          : undefined;
        const what = `step ${step} had its effect ${mine.length} times (attempts ${mine.map((l) => l.attempt).join(', ')})`;
        if (why)
          findings.push({
            runId: run.id,
            kind: 'window',
            message: `run ${run.id} ${what}: the step was in flight: ${why}`,
          });
        else bad(`${what}; the earlier effect is not explained by a kill, freeze or stall of the worker that ran it`);
      }
    }
    // A zombie: an attempt's effect after a newer attempt of the run had started.
    for (const l of effects) {
      const newer = execs.find((e) => e.start.token > l.token && e.start.atMs < l.atMs);
      if (newer)
        bad(
          `step ${stepOf(l)}'s effect by attempt ${l.attempt} (token ${l.token}) came ${l.atMs - newer.start.atMs} ms after attempt ${newer.start.attempt} (token ${newer.start.token}) had started`,
        );
    }
  }
  const prompts = new Set(f.llmPrompts);
  counts.llmPrompts = prompts.size;
  const extra = f.llmPrompts.length - prompts.size;
  if (extra > f.llmCallsInFlightBound) {
    findings.push({
      runId: '-',
      kind: 'violation',
      message: `the LLM provider saw ${f.llmPrompts.length} calls for ${prompts.size} distinct prompts: ${extra} repeats, more than the ${f.llmCallsInFlightBound} calls faults could have caught in flight`,
    });
  }
  return { findings, counts };
}
