/**
 * Intake latency at an offered rate (open loop): signed Plane deliveries are sent on a clock —
 * delivery i at t0 + i / rate — whether or not earlier ones were answered, 80 % of them retries of
 * bodies already sent, and each latency is measured from the delivery's SCHEDULED send time, so a
 * server that falls behind pays for the queue it builds (a closed loop would hide it: it sends
 * less when answers are slow). Against its own API process, started with `env`.
 *
 * The clock runs without a break through a warm-up (`warmupSeconds`, the server's first seconds:
 * code not yet optimised, pools still empty) and then the measured window. The figures are those
 * of deliveries scheduled in the window; a backlog the warm-up left behind is still in them. The
 * warm-up's own p99 is reported beside them, so a slow start is visible, not hidden.
 */
import { randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { newWorkItem, PLANE_SECRET, sign, v1Body } from '../test/support/plane';
import { postDelivery } from './intake-http';
import { startOpenLoopTrace } from './open-loop-trace';
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
  /** The measured window (deliveries scheduled after the warm-up). */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** p99 of the deliveries that created a task (the 20 % that reach Postgres twice), same window. */
  newP99Ms: number;
  /** The worst one-second slice of the window: its p99. */
  worstSecondP99Ms: number;
  warmupSeconds: number;
  warmupP99Ms: number;
  serverPeakRssMb: number | null;
  /** With `trace` (BENCH_OPEN_TRACE): the timeline of bench/open-loop-trace.ts, one line per 250 ms. */
  timeline?: string[];
}

export async function runOpenLoopIntake(
  env: Record<string, string>,
  ratePerSec: number,
  seconds: number,
  warmupSeconds: number,
  trace = false,
): Promise<OpenLoopResult> {
  const server = await startApp({ ...env, APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET });
  // No cap on sockets: an open loop opens another connection rather than wait for a free one.
  const agent = new Agent({ keepAlive: true });
  const project = randomUUID();
  const bodies: Array<{ body: string; signature: string }> = [];
  /** [scheduled offset from t0 in ms, latency in ms, created a task?] per answered delivery. */
  const answers: Array<[number, number, boolean]> = [];
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  const failed = (kind: string) => {
    errors++;
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
  };
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  const tracer = trace
    ? await startOpenLoopTrace(
        env.DATABASE_URL,
        server.child.pid,
        () => answers.length,
        () => inFlight.size,
      )
    : undefined;
  try {
    const total = Math.round(ratePerSec * (warmupSeconds + seconds));
    const t0 = performance.now() + 50;
    for (let i = 0; i < total; i++) {
      const scheduled = t0 + (i * 1000) / ratePerSec;
      const wait = scheduled - performance.now();
      if (wait > 1) await sleep(wait);
      let d: { body: string; signature: string };
      const fresh = bodies.length === 0 || Math.random() >= DUPLICATE_SHARE;
      if (!fresh) d = bodies[Math.floor(Math.random() * bodies.length)];
      else {
        const body = v1Body(newWorkItem({ project, name: `Open loop item ${bodies.length}` }), 'created');
        d = { body, signature: sign(body) };
        bodies.push(d);
      }
      sent++;
      const p = postDelivery(agent, server.port, d.body, d.signature).then(
        (status) => {
          if (status >= 300) failed(String(status));
          answers.push([scheduled - t0, performance.now() - scheduled, fresh]);
        },
        (err: NodeJS.ErrnoException) => failed(err.code ?? err.message),
      );
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
    const sentFor = (performance.now() - t0) / 1000;
    await Promise.all(inFlight);
    const timeline = await tracer?.stop();
    const warmupMs = warmupSeconds * 1000;
    const window = answers.filter(([at]) => at >= warmupMs);
    const sorted = (rows: Array<[number, number, boolean]>) => rows.map(([, ms]) => ms).sort((a, b) => a - b);
    const all = sorted(window);
    let worstSecondP99Ms = 0;
    for (let s = warmupSeconds; s < warmupSeconds + seconds; s++) {
      const slice = sorted(window.filter(([at]) => at >= s * 1000 && at < (s + 1) * 1000));
      if (slice.length) worstSecondP99Ms = Math.max(worstSecondP99Ms, pct(slice, 99));
    }
    return {
      offeredPerSec: ratePerSec,
      seconds,
      sent,
      answered: answers.length,
      errors,
      errorKinds,
      sentPerSec: sent / sentFor,
      p50Ms: pct(all, 50),
      p99Ms: pct(all, 99),
      maxMs: all[all.length - 1] ?? NaN,
      newP99Ms: pct(sorted(window.filter(([, , fresh]) => fresh)), 99),
      worstSecondP99Ms,
      warmupSeconds,
      warmupP99Ms: pct(sorted(answers.filter(([at]) => at < warmupMs)), 99),
      serverPeakRssMb: server.peakRssMb(),
      ...(timeline ? { timeline } : {}),
    };
  } finally {
    await tracer?.stop().catch(() => undefined);
    agent.destroy();
    await server.stop();
  }
}
