/**
 * The whole way with a real command: runs created and dispatched over HTTP (POST
 * /api/projects/:id/runs with dispatch: true) against an API process, executed by one worker
 * process (RUN_EXECUTOR=shell, ORCHESTRATOR_COMMAND=true: a forked `sh -c true` per run, guarded
 * by the worker's watchdog) — HTTP → Postgres → Bull → lock → claim → fork → finalize with its
 * outbox row. Compared with bare Bull whose processor forks the same `sh -c true` (bare-bull.ts
 * with fork on), at the same concurrency. The clock stops at the last run's finished_at.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { Client } from 'pg';
import { cpuMs, pool, sleep, startApp } from './support';

export interface FullPathResult {
  runs: number;
  seconds: number;
  runsPerSec: number;
  /** Runs not SUCCESS at the end, and runs that started more than one attempt (the warm-up's included). */
  notSucceeded: number;
  duplicatesExecuted: number;
  /** The worker process alone, and its command host (its forks of the commands in it) apart. */
  cpuMsPerRun: { api: number | null; worker: number | null; host: number | null };
  /**
   * The worker's event-loop delay over the phase (prom-client's monitorEventLoopDelay, which each
   * scrape resets): how long a due timer — a lock heartbeat among them — waited, in ms.
   */
  workerLoopDelayMs: { p99: number; max: number } | null;
  /** Runs through the same processes before the clock started, and their own rate (the cold start). */
  warmup: { runs: number; runsPerSec: number | null };
}

/** The worker's event-loop delay since its previous scrape (p99 and max, in ms), from /metrics. */
async function loopDelayMs(port: number): Promise<{ p99: number; max: number } | null> {
  const text = await fetch(`http://127.0.0.1:${port}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
  const read = (name: string) => {
    const m = new RegExp(`^onceflow_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) * 1000 : NaN;
  };
  const out = { p99: read('p99'), max: read('max') };
  return Number.isFinite(out.p99) && Number.isFinite(out.max) ? out : null;
}

/** The pid of the worker's command host (`onceflow-host`, a child of the worker), from /proc. */
function hostPid(workerPid: number | undefined): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (comm === 'onceflow-host' && ppid === workerPid) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

function call(
  agent: Agent,
  port: number,
  apiKey: string,
  path: string,
  body: object,
): Promise<{ status: number; json: { id?: string } }> {
  const data = JSON.stringify(body);
  return new Promise((res, rej) => {
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(data),
          Authorization: `Bearer ${apiKey}`,
        },
      },
      (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (c: string) => (text += c));
        r.on('end', () => res({ status: r.statusCode ?? 0, json: text ? JSON.parse(text) : {} }));
      },
    );
    req.on('error', rej);
    req.end(data);
  });
}

export async function measureFullPath(
  env: Record<string, string>,
  apiKey: string,
  runs: number,
  producers: number,
  workerNodeArgs: string[] = [],
  timeline = false,
  warmupRuns = 0,
): Promise<FullPathResult> {
  const shellEnv = { ...env, RUN_EXECUTOR: 'shell', ORCHESTRATOR_COMMAND: 'true', RUN_AS_USER: 'same' };
  const api = await startApp({ ...shellEnv, APP_ROLE: 'api' });
  const worker = await startApp({ ...shellEnv, APP_ROLE: 'worker' }, workerNodeArgs).catch(async (err: unknown) => {
    await api.stop();
    throw err;
  });
  const agent = new Agent({ keepAlive: true, maxSockets: producers });
  const pg = new Client({ connectionString: env.DATABASE_URL });
  try {
    await pg.connect();
    const projects: string[] = [];
    for (let i = 0; i < 8; i++) {
      const p = await call(agent, api.port, apiKey, '/api/projects', {
        name: `full-path-${i}`,
        maxConcurrentRuns: 1000,
      });
      if (p.status !== 201 || !p.json.id) throw new Error(`full path: create project answered ${p.status}`);
      projects.push(p.json.id);
    }
    // Runs created and dispatched over HTTP, `producers` calls in flight; resolves with the ids once
    // each of them finished (or two minutes passed: what is left counts as not succeeded).
    const createAll = async (n: number, label: string): Promise<string[]> => {
      const ids: string[] = [];
      await pool(n, producers, async (i) => {
        const r = await call(agent, api.port, apiKey, `/api/projects/${projects[i % projects.length]}/runs`, {
          requirement: `${label} ${i}`,
          dispatch: true,
        });
        if (r.status !== 201 || !r.json.id) throw new Error(`full path: create run answered ${r.status}`);
        ids.push(r.json.id);
      });
      const deadline = Date.now() + 120_000;
      for (;;) {
        const { rows } = await pg.query(
          `SELECT count(*)::int AS n FROM runs WHERE id = ANY($1) AND status NOT IN ('SUCCESS', 'FAILED')`,
          [ids],
        );
        if (rows[0].n === 0 || Date.now() > deadline) return ids;
        await sleep(100);
      }
    };
    const lastFinished = async (ids: string[]): Promise<number> => {
      const { rows } = await pg.query(
        `SELECT (EXTRACT(EPOCH FROM max(finished_at)) * 1000)::float8 AS last FROM runs WHERE id = ANY($1)`,
        [ids],
      );
      return Number(rows[0].last);
    };
    // The warm-up: the same load through the same processes, not measured (code V8 has not
    // optimised yet, pools still growing). Its runs are checked like the measured ones.
    let warmIds: string[] = [];
    let warmupPerSec: number | null = null;
    if (warmupRuns > 0) {
      const w0 = Date.now();
      warmIds = await createAll(warmupRuns, 'warm-up');
      warmupPerSec = (warmupRuns / ((await lastFinished(warmIds)) - w0)) * 1000;
    }
    const api0 = cpuMs(api.child.pid);
    const worker0 = cpuMs(worker.child.pid);
    const host = hostPid(worker.child.pid);
    const host0 = cpuMs(host);
    await loopDelayMs(worker.port); // resets the worker's histogram: from here on
    const t0 = Date.now();
    const ids = await createAll(runs, 'full path');
    const { rows } = await pg.query(
      `SELECT count(*) FILTER (WHERE status <> 'SUCCESS')::int AS not_succeeded,
              coalesce(sum(greatest(attempts - 1, 0)), 0)::int AS extra
         FROM runs WHERE id = ANY($1)`,
      [[...warmIds, ...ids]],
    );
    const seconds = ((await lastFinished(ids)) - t0) / 1000;
    if (timeline) await printTimeline(pg, ids, t0);
    const workerLoopDelayMs = await loopDelayMs(worker.port);
    const api1 = cpuMs(api.child.pid);
    const worker1 = cpuMs(worker.child.pid);
    const host1 = cpuMs(host);
    return {
      runs,
      seconds,
      runsPerSec: runs / seconds,
      notSucceeded: rows[0].not_succeeded,
      duplicatesExecuted: rows[0].extra,
      cpuMsPerRun: {
        api: api0 === null || api1 === null ? null : (api1 - api0) / runs,
        worker: worker0 === null || worker1 === null ? null : (worker1 - worker0) / runs,
        host: host0 === null || host1 === null ? null : (host1 - host0) / runs,
      },
      workerLoopDelayMs,
      warmup: { runs: warmupRuns, runsPerSec: warmupPerSec },
    };
  } finally {
    agent.destroy();
    await pg.end().catch(() => undefined);
    await Promise.all([api.stop(), worker.stop()]);
  }
}

/**
 * BENCH_FULL_TIMELINE: runs created, started and finished per half second of the measured window,
 * from the runs' own timestamps: whether the worker keeps up with the API or waits for it.
 */
async function printTimeline(pg: Client, ids: string[], t0: number): Promise<void> {
  const { rows } = await pg.query<{ b: number; created: number; started: number; finished: number }>(
    `SELECT floor((EXTRACT(EPOCH FROM e.at) * 1000 - $2) / 500)::int AS b,
            count(*) FILTER (WHERE e.what = 'created')::int AS created,
            count(*) FILTER (WHERE e.what = 'started')::int AS started,
            count(*) FILTER (WHERE e.what = 'finished')::int AS finished
       FROM runs r
       CROSS JOIN LATERAL (VALUES ('created', r.created_at), ('started', r.started_at), ('finished', r.finished_at)) e(what, at)
      WHERE r.id = ANY($1) AND e.at IS NOT NULL
      GROUP BY 1 ORDER BY 1`,
    [ids, t0],
  );
  for (const r of rows)
    console.log(`  t=${(r.b * 0.5).toFixed(1)}s created ${r.created} started ${r.started} finished ${r.finished}`);
}
