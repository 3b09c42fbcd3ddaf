import { classifyExit, EXIT_TRANSIENT } from './executor';

describe('classifyExit', () => {
  it('an exit status wins over everything else: 0 success, 75 transient, any other failed', () => {
    for (const [timedOut, aborted] of [
      [false, false],
      [true, false],
      [false, true],
      [true, true],
    ]) {
      expect(classifyExit(0, null, timedOut, aborted)).toBe('success');
      expect(classifyExit(EXIT_TRANSIENT, null, timedOut, aborted)).toBe('transient');
      expect(classifyExit(1, null, timedOut, aborted)).toBe('failed');
      expect(classifyExit(74, null, timedOut, aborted)).toBe('failed');
      expect(classifyExit(76, null, timedOut, aborted)).toBe('failed');
    }
    expect(EXIT_TRANSIENT).toBe(75);
  });

  it('without an exit status: our abort, then the timeout, then a SIGKILL we did not send (watchdog, OOM) are retryable', () => {
    expect(classifyExit(null, 'SIGKILL', true, true)).toBe('aborted');
    expect(classifyExit(null, 'SIGKILL', false, true)).toBe('aborted');
    expect(classifyExit(null, 'SIGKILL', true, false)).toBe('transient');
    expect(classifyExit(null, 'SIGTERM', true, false)).toBe('transient');
    expect(classifyExit(null, 'SIGKILL', false, false)).toBe('transient');
  });

  it('another signal, or no signal at all, fails the attempt', () => {
    expect(classifyExit(null, 'SIGTERM', false, false)).toBe('failed');
    expect(classifyExit(null, 'SIGSEGV', false, false)).toBe('failed');
    expect(classifyExit(null, null, false, false)).toBe('failed');
  });
});
