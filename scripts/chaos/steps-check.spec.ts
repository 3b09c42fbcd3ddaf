import type { Fault } from './cluster';
import { checkSteps, StepFacts } from './steps-check';
import { Execution, ExecLine } from './witness';

const RUN = '22222222-2222-4222-8222-222222222222';
const W1 = 2001;
const W2 = 2002;

const effect = (step: string, attempt: number, atMs: number): ExecLine => ({
  kind: 'effect',
  runId: RUN,
  attempt,
  token: attempt,
  pid: 500 + atMs,
  atMs,
  fields: { step },
});
const exec = (attempt: number, worker: number, from: number): Execution => ({
  start: { kind: 'start', runId: RUN, attempt, token: attempt, pid: 10 + attempt, atMs: from, fields: {} },
  other: [],
  worker,
  lastSeenAlive: from,
});

function facts(lines: ExecLine[], over: Partial<StepFacts> = {}): StepFacts {
  return {
    runs: [{ id: RUN, status: 'SUCCESS', requirement: 'steps=2 llm' }],
    lines,
    executions: [exec(1, W1, 0), exec(2, W2, 5000)],
    faults: [],
    workers: new Map([
      [W1, 'worker-1'],
      [W2, 'worker-2'],
    ]),
    lockTtlMs: 1500,
    llmPrompts: [],
    llmCallsInFlightBound: 0,
    ...over,
  };
}
const kinds = (f: StepFacts) => checkSteps(f).findings.map((x) => `${x.kind}: ${x.message}`);

describe('checkSteps', () => {
  it('accepts each step once, its effect in whichever attempt ran it', () => {
    expect(kinds(facts([effect('s1', 1, 100), effect('s2', 2, 5500)]))).toEqual([]);
  });

  it('wants every step of a SUCCESS run to have had its effect', () => {
    expect(kinds(facts([effect('s1', 1, 100)]))).toEqual([
      expect.stringMatching(/^violation: .*step s2 never had its effect/),
    ]);
  });

  it('explains a repeated effect only by a fault of the worker that had the first one, right after it', () => {
    const lines = [effect('s1', 1, 100), effect('s2', 1, 1000), effect('s2', 2, 5500)];
    const kill = (pid: number, atMs: number): Fault => ({ kind: 'kill', pid, atMs, label: 'w' });
    expect(kinds(facts(lines, { faults: [kill(W1, 1050)] }))).toEqual([
      expect.stringMatching(/^window: .*step s2 had its effect 2 times.*in flight.*killed 50 ms after/),
    ]);
    expect(kinds(facts(lines, { faults: [kill(W2, 1050)] }))).toEqual([
      expect.stringMatching(/^violation: .*step s2 had its effect 2 times.*not explained/),
    ]);
    expect(kinds(facts(lines, { faults: [kill(W1, 3000)] }))).toEqual([
      expect.stringMatching(/^violation: .*not explained/),
    ]);
    expect(kinds(facts(lines))).toEqual([expect.stringMatching(/^violation: .*not explained/)]);
  });

  it('flags an effect of an attempt after a newer attempt of the run had started (a zombie)', () => {
    const lines = [effect('s1', 1, 100), effect('s2', 1, 5200)];
    expect(kinds(facts(lines))).toEqual([
      expect.stringMatching(/^violation: .*s2's effect by attempt 1 .*200 ms after attempt 2/),
    ]);
  });

  it('allows one LLM call per distinct prompt, plus the calls faults could have caught in flight', () => {
    const lines = [effect('s1', 1, 100), effect('s2', 1, 200)];
    expect(kinds(facts(lines, { llmPrompts: ['a', 'b', 'a'], llmCallsInFlightBound: 1 }))).toEqual([]);
    expect(kinds(facts(lines, { llmPrompts: ['a', 'b', 'a', 'a'], llmCallsInFlightBound: 1 }))).toEqual([
      expect.stringMatching(/^violation: the LLM provider saw 4 calls for 2 distinct prompts: 2 repeats/),
    ]);
  });
});
