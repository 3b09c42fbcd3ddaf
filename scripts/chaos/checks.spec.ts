import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StubRequest } from '../../test/support/slack-stub';
import type { Fault } from './cluster';
import { checkExecutions, ExecutionFacts, expectedStatus } from './execution-check';
import { checkSlack } from './slack-check';
import { Execution, ExecLine, parseLine, Witness } from './witness';

const RUN = '11111111-1111-4111-8111-111111111111';
const W1 = 1001;
const W2 = 1002;

function line(kind: string, attempt: number, token: number, pid: number, atMs: number): ExecLine {
  return { kind, runId: RUN, attempt, token, pid, atMs, fields: {} };
}

/**
 * An execution by worker `worker` from `from` to `to`. With `end` it wrote that end line at `to`;
 * without, it was killed: last seen alive at `to`, proven dead at `deadAt` (default `to` + 10).
 */
function exec(
  attempt: number,
  worker: number,
  from: number,
  to: number,
  end?: string,
  deadAt: number | null = to + 10,
): Execution {
  return {
    start: line('start', attempt, attempt, 10 + attempt, from),
    end: end ? line(end, attempt, attempt, 10 + attempt, to) : undefined,
    other: [],
    worker,
    lastSeenAlive: to,
    lockFreedAt: end || deadAt === null ? undefined : deadAt,
  };
}

function facts(executions: Execution[], over: Partial<ExecutionFacts> = {}): ExecutionFacts {
  return {
    runs: [
      {
        id: RUN,
        status: 'SUCCESS',
        fencing_token: String(executions[executions.length - 1].start.token),
        requirement: 'sleep=1',
      },
    ],
    executions,
    faults: [],
    workers: new Map([
      [W1, 'worker-1'],
      [W2, 'worker-2'],
    ]),
    lockTtlMs: 1500,
    maxAttempts: 10,
    ...over,
  };
}

const kill = (atMs: number, pid: number): Fault => ({ atMs, kind: 'kill', pid, label: `worker-${pid - 1000}` });
const messages = (f: ExecutionFacts) => checkExecutions(f).map((x) => `${x.kind}: ${x.message}`);

describe('checkExecutions', () => {
  it('accepts a killed attempt, dead before the next one with a larger token started', () => {
    expect(
      messages(facts([exec(1, W1, 0, 900), exec(2, W2, 3000, 4000, 'done')], { faults: [kill(850, W1)] })),
    ).toEqual([]);
  });

  it('flags an overlap that is certain (seen alive after the next start), and a token that did not grow', () => {
    const second = exec(2, W2, 1000, 3000, 'done');
    second.start.token = 1;
    expect(messages(facts([exec(1, W1, 0, 2000), second]))).toEqual([
      expect.stringMatching(/fencing token did not grow/),
      expect.stringMatching(/started while attempt 1 .* still ran: it was seen alive 1000 ms later/),
    ]);
  });

  it('flags a possible overlap: last seen alive before the next start, but not proven dead until after it', () => {
    expect(messages(facts([exec(1, W1, 0, 990, undefined, 1030), exec(2, W2, 1000, 2000, 'done')]))).toEqual([
      expect.stringMatching(/may still have run: not proven dead until 30 ms later \(possible overlap\)/),
    ]);
    expect(messages(facts([exec(1, W1, 0, 990, undefined, null), exec(2, W2, 1000, 2000, 'done')]))).toEqual([
      expect.stringMatching(/not proven dead until never/),
    ]);
  });

  it('explains a second completion only by a kill of the worker that ran the extra one, near its exit', () => {
    const runs = [exec(1, W1, 0, 1000, 'done'), exec(2, W2, 3000, 4000, 'done')];
    expect(checkExecutions(facts(runs, { faults: [kill(1005, W1)] }))).toEqual([
      expect.objectContaining({
        kind: 'window',
        message: expect.stringMatching(/worker-1 \(pid 1001\) was killed 5 ms after the command exited/),
      }),
    ]);
    // Another worker's kill at the same moment explains nothing.
    expect(messages(facts(runs, { faults: [kill(1005, W2)] }))).toEqual([
      expect.stringMatching(/^violation: .*completed 2 times.*not explained/),
    ]);
    // Nor does the right worker's kill long after the exit.
    expect(messages(facts(runs, { faults: [kill(2500, W1)] }))).toEqual([
      expect.stringMatching(/^violation: .*not explained/),
    ]);
  });

  it('does not explain a second completion without a fault, nor one long after a freeze began', () => {
    expect(messages(facts([exec(1, W1, 0, 1000, 'done'), exec(2, W2, 3000, 4000, 'done')]))).toEqual([
      expect.stringMatching(/^violation: .*completed 2 times/),
    ]);
    const lateInFreeze = facts([exec(1, W1, 0, 3000, 'done'), exec(2, W2, 3500, 4500, 'done')], {
      faults: [{ atMs: 500, kind: 'freeze', pid: W1, untilMs: 5000 }],
    });
    expect(messages(lateInFreeze)).toEqual([
      expect.stringMatching(/^violation: .*completed 2 times.*not explained/),
      expect.stringMatching(/outlived its frozen worker worker-1 \(pid 1001\)'s lock: it wrote "done" 1000 ms past it/),
    ]);
  });

  it('explains a second completion by a stall of its own worker that the probe saw around the exit, not of another', () => {
    const runs = [exec(1, W1, 0, 1000, 'done'), exec(2, W2, 3000, 4000, 'done')];
    const stall = (pid: number, atMs: number, untilMs: number): Fault => ({
      kind: 'stall',
      pid,
      atMs,
      untilMs,
      label: `worker-${pid - 1000}`,
    });
    expect(checkExecutions(facts(runs, { faults: [stall(W1, 200, 900)] }))).toEqual([
      expect.objectContaining({
        kind: 'window',
        message: expect.stringMatching(/did not answer for 700 ms around the command's exit/),
      }),
    ]);
    expect(messages(facts(runs, { faults: [stall(W2, 200, 900)] }))).toEqual([
      expect.stringMatching(/^violation: .*not explained/),
    ]);
    expect(messages(facts(runs, { faults: [stall(W1, 2100, 2600)] }))).toEqual([
      expect.stringMatching(/^violation: .*not explained/),
    ]);
    // A stall that began more than a lock TTL before the exit explains nothing (the watchdog should have acted).
    expect(messages(facts(runs, { faults: [stall(W1, -600, 1200)] }))).toEqual([
      expect.stringMatching(/^violation: .*not explained/),
    ]);
  });

  it('counts a FAILED attempt like a completed one: a failing run must not fail twice', () => {
    const f = facts([exec(1, W1, 0, 1000, 'fail'), exec(2, W2, 3000, 4000, 'fail')]);
    f.runs[0] = { ...f.runs[0], status: 'FAILED', requirement: 'sleep=1 fail' };
    expect(messages(f)).toEqual([expect.stringMatching(/completed 2 times \(attempts 1 fail, 2 fail\)/)]);
  });

  it('wants a run not built to fail to end SUCCESS, and one built to fail to end FAILED', () => {
    const f = facts([exec(1, W1, 0, 1000, 'transient'), exec(2, W2, 3000, 4000, 'done')]);
    f.runs[0] = { ...f.runs[0], status: 'FAILED', requirement: 'sleep=1 transient=1' };
    expect(messages(f)).toEqual([expect.stringMatching(/ended FAILED, but it was built to end SUCCESS/)]);
    f.runs[0] = { ...f.runs[0], status: 'SUCCESS', requirement: 'sleep=1 fail' };
    expect(messages(f)).toEqual([expect.stringMatching(/ended SUCCESS, but it was built to end FAILED/)]);
    expect(expectedStatus('transient=3', 3)).toBe('FAILED');
    expect(expectedStatus('transient=2', 3)).toBe('SUCCESS');
  });

  it('flags a command that outlived its own worker’s kill, whether it wrote a line or was only seen alive', () => {
    // The bound is two thirds of the 1500 ms lock TTL: when the killed worker's lock can lapse.
    const wrote = facts([exec(1, W1, 0, 2500, 'transient'), exec(2, W2, 3000, 4000, 'done')], {
      faults: [kill(1000, W1)],
    });
    expect(messages(wrote)).toEqual([
      expect.stringMatching(
        /outlived its worker worker-1 \(pid 1001\), killed at 1000: it wrote "transient" 500 ms past it/,
      ),
    ]);
    const seen = facts([exec(1, W1, 0, 2100), exec(2, W2, 3000, 4000, 'done')], { faults: [kill(1000, W1)] });
    expect(messages(seen)).toEqual([expect.stringMatching(/it was seen alive 100 ms past it/)]);
    const maybe = facts([exec(1, W1, 0, 1900, undefined, 2050), exec(2, W2, 3000, 4000, 'done')], {
      faults: [kill(1000, W1)],
    });
    expect(messages(maybe)).toEqual([expect.stringMatching(/it was not proven dead until 50 ms past it \(possible\)/)]);
    // Another worker's kill does not concern it.
    expect(
      messages(facts([exec(1, W1, 0, 2100), exec(2, W2, 3000, 4000, 'done')], { faults: [kill(1000, W2)] })),
    ).toEqual([]);
  });

  it('wants to know which worker ran each command: none recorded, not one of ours, or an orphan that lived on', () => {
    const unknown = exec(2, W2, 3000, 4000, 'done');
    unknown.worker = undefined;
    expect(messages(facts([unknown]))).toEqual([
      expect.stringMatching(/recorded no worker: cannot tell which process ran it/),
    ]);
    const stranger = exec(2, 4242, 3000, 4000, 'done');
    expect(messages(facts([stranger]))).toEqual([
      expect.stringMatching(/spawned by pid 4242, which is none of the cluster's workers/),
    ]);
    const orphan = exec(1, 0, 0, 1400);
    expect(messages(facts([orphan, exec(2, W2, 3000, 4000, 'done')]))).toEqual([
      expect.stringMatching(/started with no worker alive \(orphan\) and was seen alive 400 ms past it/),
    ]);
    expect(messages(facts([exec(1, 0, 0, 100), exec(2, W2, 3000, 4000, 'done')]))).toEqual([]);
  });

  it('flags executions of a run the database does not know', () => {
    const f = facts([exec(1, W1, 0, 1000, 'done')]);
    f.runs = [];
    expect(messages(f)).toEqual([expect.stringMatching(/1 execution\(s\) of a run the database does not have/)]);
  });
});

describe('the witness', () => {
  it('parses the positional fields and the key=value ones, and keeps lines of new kinds with their execution', () => {
    expect(parseLine(`start ${RUN} 2 7 123 1700000000123456789 ppid=120 worker=99 lock=/x/y`)).toEqual({
      kind: 'start',
      runId: RUN,
      attempt: 2,
      token: 7,
      pid: 123,
      atMs: 1700000000123,
      fields: { ppid: '120', worker: '99', lock: '/x/y' },
    });
    expect(parseLine('garbage')).toBeNull();
    const file = join(mkdtempSync(join(tmpdir(), 'witness-')), 'executions.log');
    writeFileSync(
      file,
      [
        `start ${RUN} 1 1 999999999 1700000000000000000 ppid=5 worker=77`,
        `step-start ${RUN} 1 1 999999999 1700000000100000000 name=build`,
        `done ${RUN} 1 1 999999999 1700000000200000000 ppid=5 worker=77`,
        '',
      ].join('\n'),
    );
    const w = new Witness(file);
    w.poll();
    expect(w.executions).toHaveLength(1);
    expect(w.executions[0]).toMatchObject({
      worker: 77,
      other: [{ kind: 'step-start', fields: { name: 'build' } }],
      end: { kind: 'done' },
    });
  });
});

describe('checkSlack', () => {
  const req = (
    runId: string,
    receivedAt: number,
    answeredAt: number,
    poster: number | undefined,
    status = 'SUCCESS',
  ): StubRequest => ({
    text: `:white_check_mark: Run ${runId} in project p: ${status} — x`,
    body: {},
    receivedAt,
    answeredAt,
    state: 'answered',
    status: 200,
    poster,
    release: () => undefined,
  });
  const runs = [{ id: RUN, status: 'SUCCESS' }];

  it('wants one message per finished run and none for the others', () => {
    const found = checkSlack({
      runs: [
        { id: RUN, status: 'SUCCESS' },
        { id: 'other', status: 'CANCELLED' },
      ],
      requests: [],
      faults: [],
    });
    expect(found).toEqual([
      expect.objectContaining({ kind: 'violation', message: expect.stringMatching(/announced 0 times/) }),
    ]);
  });

  it('wants each message to announce the run’s final status', () => {
    expect(checkSlack({ runs, requests: [req(RUN, 100, 105, W1, 'FAILED')], faults: [] })).toEqual([
      expect.objectContaining({
        kind: 'violation',
        message: expect.stringMatching(/ended SUCCESS, but a Slack message announced FAILED/),
      }),
    ]);
  });

  it('explains a repeat only by a kill of the worker that posted it, soon after Slack answered it', () => {
    const requests = () => [req(RUN, 100, 105, W1), req(RUN, 2000, 2004, W2)];
    expect(checkSlack({ runs, requests: requests(), faults: [kill(110, W1)] })).toEqual([
      expect.objectContaining({
        kind: 'window',
        message: expect.stringMatching(/its poster worker-1 \(pid 1001\) was killed 5 ms after Slack answered/),
      }),
    ]);
    // Another worker's kill in the same window excuses nothing.
    expect(checkSlack({ runs, requests: requests(), faults: [kill(110, W2)] })).toEqual([
      expect.objectContaining({
        kind: 'violation',
        message: expect.stringMatching(/no kill or freeze of its poster \(pid 1001\)/),
      }),
    ]);
    // Nor the poster's kill long after it could have committed SENT.
    expect(checkSlack({ runs, requests: requests(), faults: [kill(1500, W1)] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
    // Nor a kill that came after the repeat.
    expect(
      checkSlack({ runs, requests: [req(RUN, 100, 105, W1), req(RUN, 200, 204, W2)], faults: [kill(300, W1)] }),
    ).toEqual([expect.objectContaining({ kind: 'violation' })]);
    // A kill just before the stub got to the request counts: the poster never saw the answer.
    expect(checkSlack({ runs, requests: requests(), faults: [kill(70, W1)] })).toEqual([
      expect.objectContaining({
        kind: 'window',
        message: expect.stringMatching(/killed 35 ms before Slack answered its POST \(still in flight\)/),
      }),
    ]);
    // A freeze explains it only if the poster was frozen during the commit window.
    const freeze = (atMs: number, untilMs: number): Fault => ({
      atMs,
      untilMs,
      kind: 'freeze',
      pid: W1,
      label: 'worker-1',
    });
    expect(checkSlack({ runs, requests: requests(), faults: [freeze(500, 5000)] })).toEqual([
      expect.objectContaining({ kind: 'window' }),
    ]);
    expect(checkSlack({ runs, requests: requests(), faults: [freeze(0, 50)] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
    // A stall of the poster while its POST was in flight counts (its claim lapsed, it gave up on the
    // POST): in flight since it was sent, which is the stub's clock minus the stub's own lag.
    const stall: Fault = { atMs: -1400, untilMs: -300, kind: 'stall', pid: W1, label: 'worker-1' };
    expect(checkSlack({ runs, requests: requests(), faults: [stall] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
    expect(checkSlack({ runs, requests: requests(), faults: [stall], lagBefore: () => 500 })).toEqual([
      expect.objectContaining({ kind: 'window', message: expect.stringMatching(/stalled \(no answer for 1100 ms\)/) }),
    ]);
  });

  it("explains a repeat by a freeze of the repeat's own sender only from before the first answer until just before its POST", () => {
    // The first poster sent and committed; W2 had claimed the row, froze before its request went
    // out, lost the claim, and sent on waking.
    const requests = () => [req(RUN, 100, 105, W1), req(RUN, 2000, 2004, W2)];
    const frozen = (atMs: number, untilMs: number, pid = W2): Fault => ({
      atMs,
      untilMs,
      kind: 'freeze',
      pid,
      label: `worker-${pid - 1000}`,
    });
    expect(checkSlack({ runs, requests: requests(), faults: [frozen(50, 1600)] })).toEqual([
      expect.objectContaining({
        kind: 'window',
        message: expect.stringMatching(
          /the repeat's poster worker-2 \(pid 1002\) was frozen from 55 ms before the first message was answered until 400 ms before its own POST/,
        ),
      }),
    ]);
    // Frozen only after the first message was answered: its claim was not lost to that one.
    expect(checkSlack({ runs, requests: requests(), faults: [frozen(200, 1600)] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
    // Awake for longer than the commit window before it sent: it had time to see the row SENT.
    expect(checkSlack({ runs, requests: requests(), faults: [frozen(50, 900)] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
    // Another worker's freeze explains nothing.
    expect(checkSlack({ runs, requests: requests(), faults: [frozen(50, 1600, 1003)] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
  });

  it('does not explain a repeat whose first sender is unknown', () => {
    expect(
      checkSlack({
        runs,
        requests: [req(RUN, 100, 105, undefined), req(RUN, 2000, 2004, W2)],
        faults: [kill(110, W1)],
      }),
    ).toEqual([expect.objectContaining({ kind: 'violation', message: expect.stringMatching(/sender is unknown/) })]);
  });
});
