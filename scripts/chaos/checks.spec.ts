import { checkExecutions, ExecutionFacts } from './execution-check';
import { checkSlack } from './slack-check';
import type { Execution, ExecLine, LineKind } from './witness';

const RUN = '11111111-1111-4111-8111-111111111111';

function line(kind: LineKind, attempt: number, token: number, pid: number, atMs: number): ExecLine {
  return { kind, runId: RUN, attempt, token, pid, atMs };
}

/** An execution from `from` to `to`; `end` undefined = killed, last seen alive at `to`. */
function exec(attempt: number, token: number, pid: number, from: number, to: number, end?: LineKind): Execution {
  return { start: line('start', attempt, token, pid, from), end: end ? line(end, attempt, token, pid, to) : undefined, lastSeenAlive: to };
}

function facts(executions: Execution[], over: Partial<ExecutionFacts> = {}): ExecutionFacts {
  return {
    runs: [{ id: RUN, status: 'SUCCESS', fencing_token: String(executions[executions.length - 1].start.token) }],
    executions,
    faults: [],
    // worker pid = 1000 + token in these cases
    claimer: (_run, token) => 1000 + token,
    lockTtlMs: 1500,
    ...over,
  };
}

describe('checkExecutions', () => {
  it('accepts a killed attempt followed by a later one with a larger token', () => {
    const f = facts([exec(1, 1, 10, 0, 900), exec(2, 2, 11, 3000, 4000, 'done')], { faults: [{ atMs: 850, kind: 'kill', pid: 1001 }] });
    expect(checkExecutions(f)).toEqual([]);
  });

  it('flags two overlapping executions, and a token that did not grow', () => {
    const found = checkExecutions(facts([exec(1, 2, 10, 0, 2000), exec(2, 2, 11, 1000, 3000, 'done')]));
    expect(found.map((x) => x.kind)).toEqual(['violation', 'violation']);
    expect(found[0].message).toMatch(/did not grow/);
    expect(found[1].message).toMatch(/still ran: it was seen alive 1000 ms later/);
  });

  it('explains a second completion when the first one’s worker was killed before it could commit', () => {
    const f = facts([exec(1, 1, 10, 0, 1000, 'done'), exec(2, 2, 11, 3000, 4000, 'done')], { faults: [{ atMs: 1005, kind: 'kill', pid: 1001 }] });
    expect(checkExecutions(f)).toEqual([
      expect.objectContaining({ kind: 'window', message: expect.stringMatching(/killed 5 ms after the command exited/) }),
    ]);
  });

  it('does not explain a second completion without a fault, nor one long after a freeze began', () => {
    const plain = facts([exec(1, 1, 10, 0, 1000, 'done'), exec(2, 2, 11, 3000, 4000, 'done')]);
    expect(checkExecutions(plain)).toEqual([expect.objectContaining({ kind: 'violation' })]);
    const lateInFreeze = facts([exec(1, 1, 10, 0, 3000, 'done'), exec(2, 2, 11, 3500, 4500, 'done')], {
      faults: [{ atMs: 500, kind: 'freeze', pid: 1001 }],
    });
    expect(checkExecutions(lateInFreeze)).toEqual([expect.objectContaining({ kind: 'violation', message: expect.stringMatching(/not explained/) })]);
  });

  it('flags a command that finished after its worker was killed, and a SUCCESS nobody completed', () => {
    const f = facts([exec(1, 1, 10, 0, 2000, 'transient')], { faults: [{ atMs: 1000, kind: 'kill', pid: 1001 }] });
    f.runs[0].fencing_token = '1';
    const found = checkExecutions(f).map((x) => x.message);
    expect(found).toEqual([
      expect.stringMatching(/no execution with that token completed/),
      expect.stringMatching(/wrote "transient" 1000 ms after its worker/),
    ]);
  });
});

describe('checkSlack', () => {
  const req = (runId: string, receivedAt: number, answeredAt: number) =>
    ({
      text: `:white_check_mark: Run ${runId} in project p: SUCCESS — x`,
      body: {},
      receivedAt,
      answeredAt,
      state: 'answered',
      status: 200,
      release: () => undefined,
    }) as const;

  it('wants one message per finished run and none for the others', () => {
    const found = checkSlack({
      runs: [
        { id: RUN, status: 'SUCCESS' },
        { id: 'other', status: 'CANCELLED' },
      ],
      requests: [],
      faults: [],
    });
    expect(found).toEqual([expect.objectContaining({ kind: 'violation', message: expect.stringMatching(/announced 0 times/) })]);
  });

  it('explains a repeat only by a crash between the first POST and its commit', () => {
    const runs = [{ id: RUN, status: 'SUCCESS' }];
    const requests = [req(RUN, 100, 105), req(RUN, 2000, 2004)];
    expect(checkSlack({ runs, requests: [...requests], faults: [{ atMs: 110, kind: 'kill', label: 'worker-1', pid: 7 }] })).toEqual([
      expect.objectContaining({ kind: 'window', message: expect.stringMatching(/killed 5 ms after Slack answered/) }),
    ]);
    expect(checkSlack({ runs, requests: [...requests], faults: [{ atMs: 1500, kind: 'kill', label: 'worker-1', pid: 7 }] })).toEqual([
      expect.objectContaining({ kind: 'violation' }),
    ]);
  });
});
