import { blockEventLoop, waitFor } from './app';

describe('waitFor', () => {
  it('does not count a stall of this process against the timeout', async () => {
    // The awaited work is due at 100 ms; the process is frozen from 10 ms to 1,210 ms, past the
    // 500 ms timeout. On waking, the poll's timer runs first: counted, the stall would time it out.
    let done = false;
    setTimeout(() => (done = true), 100);
    setTimeout(() => blockEventLoop(1200), 10);
    await expect(waitFor(() => done, 500, 'the work', 50)).resolves.toBeUndefined();
  });

  it('still times out when the awaited thing does not happen', async () => {
    const started = Date.now();
    await expect(waitFor(() => false, 300, 'nothing', 50)).rejects.toThrow(
      'timed out after 300 ms waiting for nothing',
    );
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
