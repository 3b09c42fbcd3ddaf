import { Agent } from 'node:http';
import { join } from 'node:path';
import { NotificationClaimsRepository } from '../src/notifications/notification-claims.repository';
import { NotificationDeliveryService } from '../src/notifications/notification-delivery.service';
import { pendingOutboxRow } from './support/outbox-rows';
import { closeDb, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { SlackStub } from './support/slack-stub';

const LEASE_MS = 1500;

/** Blocks this process's only thread, as SIGSTOP or a long GC pause would: no timer, no I/O runs. */
function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * The POST of a notification is written only while its claim surely holds (docs/notifications.md,
 * "Where exactly-once ends"): a deliverer that froze after its claim and woke past the point where
 * the claim could lapse sends nothing, and the row's next holder posts the message once. The stub
 * is the witness of what Slack got; the freezes are real (the test process's thread stops).
 */
describe('NotificationDeliveryService: the POST is written only while the claim holds', () => {
  const countFile = join(tempDir('notify-write-gate'), 'executions.log');
  let stub: SlackStub;
  let t: TestApp;
  let delivery: NotificationDeliveryService;
  let claims: NotificationClaimsRepository;

  beforeAll(async () => {
    stub = await SlackStub.start();
    t = await startApp(
      testEnv('notify-write-gate', countFile, {
        SLACK_WEBHOOK_URL: stub.url,
        RUN_LOCK_TTL_MS: String(LEASE_MS),
        RECONCILE_INTERVAL_MS: '3600000',
      }),
    );
    delivery = t.app.get(NotificationDeliveryService);
    claims = t.app.get(NotificationClaimsRepository);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(async () => {
    await t.close();
    await stub.close();
    await closeDb();
  });

  const unwritten = { kind: 'later', delayMs: LEASE_MS + 100, reason: 'claim could lapse before the POST was written' };

  /** After the lease lapsed, the next attempt posts the message: exactly once in all. */
  async function nextHolderPostsOnce(id: string, runId: string): Promise<void> {
    await new Promise((res) => setTimeout(res, LEASE_MS + 200));
    expect(await delivery.deliver(id)).toEqual({ kind: 'sent', attempts: 2 });
    expect(stub.for(runId)).toHaveLength(1);
    expect(stub.delivered(runId)).toBe(1);
  }

  it('frozen while its connection was being opened: woken connected but past the deadline, it writes nothing', async () => {
    const r = await pendingRow();
    // No pooled connection to reuse: the POST opens one, and the process freezes right then.
    stub.closeIdleConnections();
    await new Promise((res) => setTimeout(res, 100));
    const real = Agent.prototype.createConnection;
    const opened = jest.spyOn(Agent.prototype, 'createConnection').mockImplementation(function (
      this: Agent,
      ...args: Parameters<Agent['createConnection']>
    ) {
      const socket = real.apply(this, args);
      // The freeze comes with the connection: before anything queued for the socket is written.
      socket?.prependOnceListener('connect', () => freeze(LEASE_MS + 200));
      return socket;
    });
    expect(await delivery.deliver(r.id)).toEqual(unwritten);
    expect(opened).toHaveBeenCalledTimes(1);
    opened.mockRestore();
    // Slack got nothing: not at the wake-up, not later.
    await new Promise((res) => setTimeout(res, 300));
    expect(stub.for(r.runId)).toHaveLength(0);
    await nextHolderPostsOnce(r.id, r.runId);
  });

  it('frozen between the claim and the POST: counted from when the claim was asked for, it writes nothing', async () => {
    const r = await pendingRow();
    const real = claims.claim.bind(claims);
    jest.spyOn(claims, 'claim').mockImplementation(async (...args) => {
      const claimed = await real(...args);
      freeze(LEASE_MS + 200);
      return claimed;
    });
    expect(await delivery.deliver(r.id)).toEqual(unwritten);
    jest.restoreAllMocks();
    await new Promise((res) => setTimeout(res, 300));
    expect(stub.for(r.runId)).toHaveLength(0);
    await nextHolderPostsOnce(r.id, r.runId);
  });

  it('not frozen: the POST is written and the message posted once', async () => {
    const r = await pendingRow();
    expect(await delivery.deliver(r.id)).toEqual({ kind: 'sent', attempts: 1 });
    expect(stub.delivered(r.runId)).toBe(1);
  });

  function pendingRow() {
    return pendingOutboxRow(t.app, 'run.failed', 'write gate test');
  }
});
