import { classifyExit } from './executor';
import { OutputTail } from './output-tail';

describe('OutputTail', () => {
  it('keeps only the last bytes', () => {
    const t = new OutputTail(10);
    t.push(Buffer.from('0123456789'));
    t.push(Buffer.from('abcdef'));
    expect(t.toString()).toBe('6789abcdef');
  });
  it('drops NUL bytes Postgres text cannot hold', () => {
    const t = new OutputTail(100);
    t.push(Buffer.from('a\u0000b'));
    expect(t.toString()).toBe('ab');
  });
});

describe('classifyExit', () => {
  it.each([
    [0, null, false, false, 'success'],
    [75, null, false, false, 'transient'],
    [null, 'SIGKILL', true, false, 'transient'],
    [1, null, false, false, 'failed'],
    [null, 'SIGSEGV', false, false, 'failed'],
    [null, 'SIGKILL', false, false, 'transient'],
    [null, 'SIGKILL', false, true, 'aborted'],
    [null, null, false, true, 'aborted'],
    // Ended on its own while the abort (or the timeout) was under way: its own outcome counts.
    [0, null, false, true, 'success'],
    [0, null, true, false, 'success'],
    [75, null, false, true, 'transient'],
    [3, null, false, true, 'failed'],
  ] as const)('exit %s signal %s timedOut %s aborted %s -> %s', (code, sig, timedOut, aborted, outcome) => {
    expect(classifyExit(code, sig, timedOut, aborted)).toBe(outcome);
  });
});
