import { ShutdownAbort } from '../src/locks/heartbeat';
import type { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { RetryLaterError } from '../src/locks/retry-later.error';
import { runLockKey } from '../src/queues/job-ids';
import { db, waitFor } from './support/app';
import { TTL_MS, processorHarness } from './support/processor-harness';
import { runRow } from './support/run-rows';

/**
 * RunProcessor.handle under its lease (test/support/processor-harness.ts): a lost or aborted lease,
 * a cancel seen at a beat, the beats that renew the lease and feed the command's watchdog, and a
 * shutdown's hand-over.
 */
describe('RunProcessor: the attempt under its lease', () => {
  const h = processorHarness('processor-lease');
  beforeAll(h.start);
  afterEach(h.reset);
  afterAll(h.stop);

  it('an aborted attempt records nothing and comes back after a lock TTL', async () => {
    const { runId } = await h.queuedRun();
    h.behaviour = async () => ({ outcome: 'aborted', exitCode: null, signal: 'SIGKILL' });
    const { error } = await h.attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect((error as RetryLaterError).retryDelayMs).toBe(TTL_MS + 100);
    expect((error as Error).message).toBe('attempt aborted (lock lost or cancelled)');
    expect(await runRow(runId)).toMatchObject({ status: 'RUNNING', attempts: 1 });
  });

  it('a cancel reaches the running attempt at the next beat: its signal aborts, nothing is recorded', async () => {
    const { runId } = await h.queuedRun();
    let abortedAfter = -1;
    h.behaviour = async (_req, signal) => {
      const cancelled = Date.now();
      await db().query(`UPDATE runs SET status = 'CANCELLED', finished_at = now() WHERE id = $1`, [runId]);
      await waitFor(() => signal.aborted, TTL_MS * 2, 'the lease to abort');
      abortedAfter = Date.now() - cancelled;
      return { outcome: 'aborted', exitCode: null, signal: 'SIGKILL' };
    };
    const { error } = await h.attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect(abortedAfter).toBeLessThan(TTL_MS);
    expect(await runRow(runId)).toMatchObject({ status: 'CANCELLED' });
  });

  it('each beat renews the lease in Postgres and feeds the command’s watchdog', async () => {
    const { runId } = await h.queuedRun();
    let pings = 0;
    const leases: number[] = [];
    const guards: Array<{ until: number; lockEnds: number }> = [];
    const locks = h.t.app.get<LockService>(LOCK_SERVICE);
    h.behaviour = async (req) => {
      req.keepAlive?.(() => pings++);
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, TTL_MS / 3));
        leases.push(Number((await runRow(runId)).lease_ms));
        const left = await locks.remainingMs(runLockKey(runId));
        // The latest the lock can end: the answer's arrival plus what Redis said was left.
        guards.push({ until: req.guardUntil!(), lockEnds: Date.now() + left });
      }
      return {};
    };
    expect(await h.attempt(runId)).toEqual({ result: 'succeeded' });
    expect(pings).toBeGreaterThanOrEqual(2);
    // Without the renewal the lease set by the claim would run out within the four looks.
    expect(Math.min(...leases.slice(2))).toBeGreaterThan(TTL_MS / 3);
    // The watchdog's deadline moves with the renewals and stays a fifth of the TTL before the
    // Redis lock can lapse (2 ms for PTTL's rounding).
    expect(guards.at(-1)!.until - guards[0].until).toBeGreaterThanOrEqual(TTL_MS / 3);
    for (const g of guards) expect(g.lockEnds - g.until).toBeGreaterThanOrEqual(TTL_MS * 0.2 - 2);
  });

  it('a shutdown hands the run straight back: RETRYING with the attempt not counted', async () => {
    const { runId } = await h.queuedRun({ attempts: 1 });
    h.behaviour = async (_req, signal) => {
      const active = (h.guard as unknown as { active: Map<string, { heartbeat: { abort(e: Error): void } }> }).active;
      for (const [key, lease] of active) if (key.includes(runId)) lease.heartbeat.abort(new ShutdownAbort());
      expect(signal.aborted).toBe(true);
      return { outcome: 'aborted', exitCode: null, signal: 'SIGKILL' };
    };
    const { error } = await h.attempt(runId);
    expect(error).toBeInstanceOf(RetryLaterError);
    expect((error as RetryLaterError).retryDelayMs).toBe(0);
    expect((error as Error).message).toBe('handed over: worker shutting down');
    expect(await runRow(runId)).toMatchObject({ status: 'RETRYING', attempts: 1, lease_owner: null });
  });

  it('records a command that finished on its own during a shutdown: the exit wins over the hand-over', async () => {
    const { runId } = await h.queuedRun();
    h.behaviour = async () => {
      const active = (h.guard as unknown as { active: Map<string, { heartbeat: { abort(e: Error): void } }> }).active;
      for (const [key, lease] of active) if (key.includes(runId)) lease.heartbeat.abort(new ShutdownAbort());
      return {};
    };
    expect(await h.attempt(runId)).toEqual({ result: 'succeeded' });
    expect(await runRow(runId)).toMatchObject({ status: 'SUCCESS', attempts: 1 });
  });
});
