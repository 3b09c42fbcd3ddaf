import { connect, Socket } from 'node:net';
import { startProcess, waitFor, WorkerProcess } from './support/app';
import { tempDir, testEnv } from './support/env';

/** More than Node's default accept queue (511) holds, well under ours (4096). */
const BURST = 800;

/**
 * A burst of senders connecting while the server is not accepting (here: stopped with SIGSTOP, as a
 * long GC pause or a saturated event loop would leave it). The kernel completes each handshake into
 * the accept queue on its own; once that queue is full it drops the SYN, and the sender tries again
 * only after a second, then three: a short stall becomes seconds of latency for every sender past
 * the 511th. With our backlog every connection is established at once and answered after SIGCONT.
 */
describe('the HTTP listener under a burst of connections while the server is busy', () => {
  let app: WorkerProcess;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    app = await startProcess(testEnv('backlog', `${tempDir('backlog')}/executions.log`), 'api');
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await app?.stop();
  });

  it(`establishes all ${BURST} connections without a SYN retry and answers each of them`, async () => {
    app.child.kill('SIGSTOP');
    const connectMs: number[] = [];
    const answered = new Set<number>();
    try {
      for (let i = 0; i < BURST; i++) {
        const started = performance.now();
        const s = connect(app.port, '127.0.0.1');
        sockets.push(s);
        s.on('error', () => undefined);
        s.once('connect', () => {
          connectMs.push(performance.now() - started);
          s.write(`GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
        });
        let reply = '';
        s.on('data', (c: Buffer) => {
          reply += c.toString();
          if (reply.startsWith('HTTP/1.1 200')) answered.add(i);
        });
      }
      // Handshakes the kernel queued complete in milliseconds; a dropped SYN is retried after 1 s.
      await waitFor(() => connectMs.length === BURST, 1_500, 'every handshake').catch(() => undefined);
    } finally {
      app.child.kill('SIGCONT');
    }
    expect(connectMs.length).toBe(BURST);
    await waitFor(() => answered.size === BURST, 30_000, `answers to all ${BURST} requests`);
  });
});
