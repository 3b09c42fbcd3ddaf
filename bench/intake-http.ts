/** The bench's HTTP client side of the intake: a signed Plane delivery, and the trivial route. */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { MachineCpu, machineCpu } from './support';

/** POSTs one delivery as Plane sends it (a fresh X-Plane-Delivery per attempt); answers its status. */
export function postDelivery(agent: Agent, port: number, body: string, signature: string): Promise<number> {
  return new Promise((res, rej) => {
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/webhooks/plane',
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
          'User-Agent': 'Autopilot',
          'X-Plane-Event': 'issue',
          'X-Plane-Delivery': randomUUID(),
          'X-Plane-Signature': signature,
        },
      },
      (r) => {
        r.resume();
        r.on('end', () => res(r.statusCode ?? 0));
      },
    );
    req.on('error', rej);
    req.end(body);
  });
}

/** GET /health/live: the trivial route the intake is compared with. */
export function getLive(agent: Agent, port: number): Promise<void> {
  return new Promise<void>((res, rej) => {
    const req = request({ agent, host: '127.0.0.1', port, path: '/health/live' }, (r) => {
      r.resume();
      r.on('end', () => res());
    });
    req.on('error', rej);
    req.end();
  });
}

/**
 * Starts a window on the machine's CPU `afterMs` from now (at once for 0); the returned function
 * ends it. For a measured part that follows an unmeasured warm-up.
 */
export function machineCpuAfter(afterMs: number): () => MachineCpu | null {
  let end: (() => MachineCpu | null) | null = afterMs > 0 ? null : machineCpu();
  const timer = afterMs > 0 ? setTimeout(() => (end = machineCpu()), afterMs) : undefined;
  return () => {
    clearTimeout(timer);
    return end ? end() : null;
  };
}

/**
 * `concurrency` loops, each sending one request after another, for `warmupMs` unmeasured and then
 * `ms`: the requests answered in the measured part, its length in seconds and the machine's CPU.
 */
export async function closedLoop(
  concurrency: number,
  send: () => Promise<unknown>,
  ms: number,
  warmupMs = 0,
): Promise<{ answered: number; seconds: number; machine: MachineCpu | null }> {
  let answered = 0;
  const machine = machineCpuAfter(warmupMs);
  const measureFrom = Date.now() + warmupMs;
  const stopAt = measureFrom + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < stopAt) {
        await send();
        if (Date.now() >= measureFrom) answered++;
      }
    }),
  );
  const used = machine();
  return { answered, seconds: (Date.now() - measureFrom) / 1000, machine: used };
}
