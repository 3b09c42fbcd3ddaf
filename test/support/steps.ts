import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TEST_SCRIPTS } from './env';

export const STEPS_ORCHESTRATOR = join(TEST_SCRIPTS, 'steps-orchestrator.sh');

export interface StepLine {
  kind: 'start' | 'done' | 'fail' | 'stepbegin' | 'effect' | 'escaped';
  runId: string;
  attempt: number;
  token: number;
  pid: number;
  atNs: bigint;
  /** The step (stepbegin, effect) or the exit code of a late step call (escaped). */
  extra: string;
}

/** What the steps orchestrator and its steps appended: what really ran, seen from outside the app. */
export function stepLines(file: string, runId?: string): StepLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [kind, id, attempt, token, pid, at, extra] = line.split(' ');
      return {
        kind: kind as StepLine['kind'],
        runId: id,
        attempt: Number(attempt),
        token: Number(token),
        pid: Number(pid),
        atNs: BigInt(at),
        extra,
      };
    })
    .filter((l) => !runId || l.runId === runId);
}

/** Effects per step name (each must be 1: a step's effect happened exactly once). */
export function effectsByStep(file: string, runId: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of stepLines(file, runId).filter((x) => x.kind === 'effect')) out[l.extra] = (out[l.extra] ?? 0) + 1;
  return out;
}

/** The steps that began in one attempt, in order. */
export function stepsBegunIn(file: string, runId: string, attempt: number): string[] {
  return stepLines(file, runId)
    .filter((l) => l.kind === 'stepbegin' && l.attempt === attempt)
    .map((l) => l.extra);
}
