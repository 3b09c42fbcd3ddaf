/**
 * Intake latency at an offered rate (open loop): signed Plane deliveries are sent on a clock —
 * delivery i at t0 + i / rate — whether or not earlier ones were answered, 80 % of them retries of
 * bodies already sent, and each latency is measured from the delivery's SCHEDULED send time, so a
 * server that falls behind pays for the queue it builds (a closed loop would hide it: it sends
 * less when answers are slow). Against its own API process, started with `env`.
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { newWorkItem, PLANE_SECRET, sign, v1Body } from '../test/support/plane';
import { pct, sleep, startApp } from './support';
import { DUPLICATE_SHARE } from './webhook-intake';

export interface OpenLoopResult {
  offeredPerSec: number;
  seconds: number;
  sent: number;
  answered: number;
  /** Answers that were not 2xx, and requests that failed outright. */
  errors: number;
  /** The errors by kind: an HTTP status, or the client-side error code (a refused or reset socket). */
  errorKinds: Record<string, number>;
  /** Achieved send rate: how close the client kept to its schedule. */
  sentPerSec: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  serverPeakRssMb: number | null;
}

function post(agent: Agent, port: number, body: string, signature: string): Promise<number> {
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

export async function runOpenLoopIntake(
  env: Record<string, string>,
  ratePerSec: number,
  seconds: number,
): Promise<OpenLoopResult> {
  const server = await startApp({ ...env, APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET });
  // No cap on sockets: an open loop opens another connection rather than wait for a free one.
  const agent = new Agent({ keepAlive: true });
  const project = randomUUID();
  const bodies: Array<{ body: string; signature: string }> = [];
  const latencies: number[] = [];
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  const failed = (kind: string) => {
    errors++;
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
  };
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  try {
    const total = Math.round(ratePerSec * seconds);
    const t0 = performance.now() + 50;
    for (let i = 0; i < total; i++) {
      const scheduled = t0 + (i * 1000) / ratePerSec;
      const wait = scheduled - performance.now();
      if (wait > 1) await sleep(wait);
      let d: { body: string; signature: string };
      if (bodies.length > 0 && Math.random() < DUPLICATE_SHARE) d = bodies[Math.floor(Math.random() * bodies.length)];
      else {
        const body = v1Body(newWorkItem({ project, name: `Open loop item ${bodies.length}` }), 'created');
        d = { body, signature: sign(body) };
        bodies.push(d);
      }
      sent++;
      const p = post(agent, server.port, d.body, d.signature).then(
        (status) => {
          if (status >= 300) failed(String(status));
          latencies.push(performance.now() - scheduled);
        },
        (err: NodeJS.ErrnoException) => failed(err.code ?? err.message),
      );
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
    const sentFor = (performance.now() - t0) / 1000;
    await Promise.all(inFlight);
    const sorted = latencies.sort((a, b) => a - b);
    return {
      offeredPerSec: ratePerSec,
      seconds,
      sent,
      answered: latencies.length,
      errors,
      errorKinds,
      sentPerSec: sent / sentFor,
      p50Ms: pct(sorted, 50),
      p99Ms: pct(sorted, 99),
      maxMs: sorted[sorted.length - 1] ?? NaN,
      serverPeakRssMb: server.peakRssMb(),
    };
  } finally {
    agent.destroy();
    await server.stop();
  }
}
