/**
 * Plane intake throughput and latency: starts onceflow (API role, compiled dist), fires signed
 * Plane `created` deliveries at concurrency 64 for ~10 s, 80 % of them byte-identical retries of
 * bodies already sent, and measures deliveries/s and p50/p99 latency. Part of `npm run bench`
 * (bench.ts); also runs alone against a scratch database of its own:
 *
 *   npx tsc -p tsconfig.build.json && node dist/bench/webhook-intake.js
 *
 * Uses the local Postgres and Redis (DATABASE_URL's server, REDIS_URL); drops what it made.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { configFromProcessEnv, processEnvironment } from '../src/config/env';
import { newWorkItem, PLANE_SECRET, sign, v1Body } from '../test/support/plane';
import { formatByKind, IntakeByKind, measureIntakeByKind } from './intake-by-kind';
import { closedLoop, getLive, machineCpuAfter, postDelivery } from './intake-http';
import {
  cpuMs,
  dropDatabase,
  dropRedisPrefix,
  load,
  busyText,
  MachineCpu,
  pct,
  serviceCpu,
  startApp,
  withDatabase,
} from './support';

export const INTAKE_CONCURRENCY = 64;
const DURATION_MS = 10_000;
const WARMUP_MS = 5_000;
export const DUPLICATE_SHARE = 0.8;
const PLANE_PROJECTS = 4;
const SINGLE_MS = 3_000;
const CEILING_MS = 3_000;
const BY_KIND_SECONDS = 3;

interface Sample {
  kind: 'new' | 'retry';
  status: number;
  ms: number;
}

export interface Latency {
  n: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface IntakeResult {
  concurrency: number;
  duplicateShare: number;
  seconds: number;
  deliveriesPerSec: number;
  all: Latency;
  new: Latency;
  retry: Latency;
  unloaded: { deliveriesPerSec: number; new: Latency; retry: Latency };
  statusCounts: Record<number, number>;
  clientErrors: number;
  distinctBodies: number;
  stored: { tasks: number; runs: number; deliveries: number; duplicatesCounted: number };
  /**
   * CPU per delivery of the loaded phase (warm-up included, as are its deliveries): the API
   * process, the Postgres backends of its database, and the Redis server (all its users). On a
   * shared machine this is steadier than deliveries/s.
   */
  cpuPerDeliveryMs: { api: number | null; postgres: number | null; redis: number };
  /** Load average (1, 5, 15 min) when the loaded phase ended. */
  loadAverage: string;
  /** Set when the database does not hold exactly one task, run and delivery per distinct body. */
  mismatch: string | null;
  serverPeakRssMb: number | null;
  /**
   * GET /health/live answers/s at the same concurrency against the same process: the ceiling of
   * the HTTP stack alone (Express, Nest, logging) on this machine, for reading the intake figure.
   */
  httpCeilingPerSec: number;
  /**
   * The whole machine while the loaded phase and the ceiling were measured, and its busy CPU µs
   * per delivery / request: where both leave no CPU spare, their rate ratio is the inverse of these.
   */
  machine: { loaded: MachineCpu | null; loadedUs: number | null; ceiling: MachineCpu | null; ceilingUs: number | null };
  /** After the ceiling: new items only, retries only and the trivial route, one kind at a time. */
  byKind: IntakeByKind;
}

/**
 * The trivial route's rate, after half as long unmeasured: like every throughput phase it is
 * warmed first (measured cold, straight after the closed loop, it read 5–10 % low, and so
 * flattered the intake's ratio).
 */
async function ceiling(
  agent: Agent,
  port: number,
): Promise<{ perSec: number; machine: MachineCpu | null; answered: number }> {
  const { answered, seconds, machine } = await closedLoop(
    INTAKE_CONCURRENCY,
    () => getLive(agent, port),
    CEILING_MS,
    CEILING_MS / 2,
  );
  return { perSec: answered / seconds, machine, answered };
}

function latency(s: Sample[]): Latency {
  const ms = s.map((x) => x.ms).sort((a, b) => a - b);
  return { n: ms.length, p50Ms: pct(ms, 50), p99Ms: pct(ms, 99), maxMs: ms[ms.length - 1] ?? NaN };
}

/**
 * Runs the intake bench against an API process started with `env` (its DATABASE_URL must exist
 * or be creatable; the process migrates it). The database may hold other phases' runs, but no tasks.
 */
export async function runIntakeBench(env: Record<string, string>, nodeArgs: string[] = []): Promise<IntakeResult> {
  const server = await startApp({ ...env, APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET }, nodeArgs);
  const agent = new Agent({ keepAlive: true, maxSockets: INTAKE_CONCURRENCY });
  const projects = Array.from({ length: PLANE_PROJECTS }, () => randomUUID());
  const sent: Array<{ body: string; signature: string }> = [];
  let errors = 0;
  const fresh = (): { body: string; signature: string } => {
    const body = v1Body(
      newWorkItem({ project: projects[sent.length % PLANE_PROJECTS], name: `Bench item ${sent.length}` }),
      'created',
    );
    const delivery = { body, signature: sign(body) };
    sent.push(delivery);
    return delivery;
  };
  const anySent = () => sent[Math.floor(Math.random() * sent.length)];

  /** `concurrency` loops, each sending one delivery after another; samples after the warm-up. */
  async function phase(
    concurrency: number,
    warmupMs: number,
    durationMs: number,
  ): Promise<{ samples: Sample[]; seconds: number; answered: number; machine: MachineCpu | null }> {
    const samples: Sample[] = [];
    let answered = 0;
    const machine = machineCpuAfter(warmupMs);
    const measureFrom = Date.now() + warmupMs;
    const stopAt = measureFrom + durationMs;
    const loop = async (): Promise<void> => {
      while (Date.now() < stopAt) {
        const retry = sent.length > 0 && Math.random() < DUPLICATE_SHARE;
        const delivery = retry ? anySent() : fresh();
        const t0 = process.hrtime.bigint();
        try {
          const status = await postDelivery(agent, server.port, delivery.body, delivery.signature);
          answered++;
          if (Date.now() >= measureFrom)
            samples.push({ kind: retry ? 'retry' : 'new', status, ms: Number(process.hrtime.bigint() - t0) / 1e6 });
        } catch {
          errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
    const used = machine();
    return { samples, seconds: (Date.now() - measureFrom) / 1000, answered, machine: used };
  }

  try {
    // Unloaded first (what one delivery costs), then the load the issue asks about.
    const single = await phase(1, 500, SINGLE_MS);
    const redisUrl = env.REDIS_URL ?? configFromProcessEnv({ API_KEYS: 'bench-api-key-0123456789' }).redis.url;
    const services = await serviceCpu(env.DATABASE_URL, redisUrl);
    const api0 = cpuMs(server.child.pid);
    const { samples, seconds, answered, machine } = await phase(INTAKE_CONCURRENCY, WARMUP_MS, DURATION_MS);
    const api1 = cpuMs(server.child.pid);
    const loadAverage = load();
    const used = await services();
    const per = (ms: number | null) => (ms === null ? null : ms / answered);
    const serverPeakRssMb = server.peakRssMb();
    const top = await ceiling(agent, server.port);
    const send = (d: { body: string; signature: string }) => postDelivery(agent, server.port, d.body, d.signature);
    const byKind = await measureIntakeByKind({
      concurrency: INTAKE_CONCURRENCY,
      secondsEach: BY_KIND_SECONDS,
      apiPid: server.child.pid,
      databaseUrl: env.DATABASE_URL,
      redisUrl,
      newItem: () => send(fresh()),
      retry: () => send(anySent()),
      trivial: () => getLive(agent, server.port),
    });
    const pg = new Client({ connectionString: env.DATABASE_URL });
    await pg.connect();
    const { rows } = await pg.query(
      `SELECT (SELECT count(*) FROM tasks)::int AS tasks, (SELECT count(*) FROM runs WHERE task_id IS NOT NULL)::int AS runs,
              (SELECT count(*) FROM webhook_deliveries)::int AS deliveries,
              (SELECT coalesce(sum(duplicate_count), 0)::int FROM webhook_deliveries) AS dups`,
    );
    await pg.end();
    const stored = {
      tasks: rows[0].tasks,
      runs: rows[0].runs,
      deliveries: rows[0].deliveries,
      duplicatesCounted: rows[0].dups,
    };
    const ok = stored.tasks === sent.length && stored.runs === sent.length && stored.deliveries === sent.length;
    return {
      concurrency: INTAKE_CONCURRENCY,
      duplicateShare: DUPLICATE_SHARE,
      seconds,
      deliveriesPerSec: samples.length / seconds,
      all: latency(samples),
      new: latency(samples.filter((s) => s.kind === 'new')),
      retry: latency(samples.filter((s) => s.kind === 'retry')),
      unloaded: {
        deliveriesPerSec: single.samples.length / single.seconds,
        new: latency(single.samples.filter((s) => s.kind === 'new')),
        retry: latency(single.samples.filter((s) => s.kind === 'retry')),
      },
      statusCounts: samples.reduce<Record<number, number>>(
        (acc, s) => ({ ...acc, [s.status]: (acc[s.status] ?? 0) + 1 }),
        {},
      ),
      clientErrors: errors,
      distinctBodies: sent.length,
      stored,
      mismatch: ok
        ? null
        : `expected one task, run and delivery per distinct body (${sent.length}), got ${JSON.stringify(stored)}`,
      serverPeakRssMb,
      httpCeilingPerSec: top.perSec,
      machine: {
        loaded: machine,
        loadedUs: machine && samples.length ? (machine.busyMs * 1000) / samples.length : null,
        ceiling: top.machine,
        ceilingUs: top.machine && top.answered ? (top.machine.busyMs * 1000) / top.answered : null,
      },
      byKind,
      cpuPerDeliveryMs: {
        api: per(api0 === null || api1 === null ? null : api1 - api0),
        postgres: per(used.postgresMs),
        redis: used.redisMs / answered,
      },
      loadAverage,
    };
  } finally {
    agent.destroy();
    await server.stop();
  }
}

export function formatIntake(r: IntakeResult): string {
  const ms = (v: number | null) => (v === null ? '?' : `${v.toFixed(3)} ms`);
  const us = (v: number | null) => (v === null ? '?' : v.toFixed(0));
  const line = (label: string, l: Latency) =>
    `${label.padEnd(8)} n=${String(l.n).padStart(6)}  p50=${l.p50Ms.toFixed(2)} ms  p99=${l.p99Ms.toFixed(2)} ms  max=${l.maxMs.toFixed(2)} ms`;
  return [
    `Plane intake bench: concurrency ${r.concurrency}, ${DURATION_MS / 1000} s measured after ${WARMUP_MS / 1000} s warm-up, ${r.duplicateShare * 100} % retries`,
    `deliveries/s: ${r.deliveriesPerSec.toFixed(0)}  (HTTP status counts ${JSON.stringify(r.statusCounts)}, client errors ${r.clientErrors})`,
    line('all', r.all),
    line('new', r.new),
    line('retry', r.retry),
    `unloaded (concurrency 1, ${SINGLE_MS / 1000} s): ${r.unloaded.deliveriesPerSec.toFixed(0)} deliveries/s`,
    line('  new', r.unloaded.new),
    line('  retry', r.unloaded.retry),
    `database: ${r.stored.tasks} tasks, ${r.stored.runs} runs, ${r.stored.deliveries} deliveries (${r.distinctBodies} distinct bodies sent), ${r.stored.duplicatesCounted} duplicates counted`,
    `CPU per delivery (loaded phase): API ${ms(r.cpuPerDeliveryMs.api)}, Postgres backends ${ms(r.cpuPerDeliveryMs.postgres)}, Redis server ${ms(r.cpuPerDeliveryMs.redis)}; load average ${r.loadAverage}`,
    `API process peak RSS: ${r.serverPeakRssMb ?? '?'} MB; HTTP ceiling (GET /health/live, same concurrency): ${r.httpCeilingPerSec.toFixed(0)}/s`,
    `the whole machine: ${busyText(r.machine.loaded)}, ${us(r.machine.loadedUs)} µs per delivery; under the ceiling ${busyText(r.machine.ceiling)}, ${us(r.machine.ceilingUs)} µs per request`,
    formatByKind(r.byKind),
  ].join('\n');
}

async function main(): Promise<void> {
  const tag = `bench_wh_${Date.now().toString(36)}_${randomBytes(2).toString('hex')}`;
  const config = configFromProcessEnv({ API_KEYS: 'bench-api-key-0123456789' });
  const databaseUrl = withDatabase(config.database.url, `onceflow_${tag}`);
  const workspaceRoot = mkdtempSync(join(tmpdir(), 'onceflow-bench-wh-'));
  const env: Record<string, string> = {
    ...(processEnvironment() as Record<string, string>),
    DATABASE_URL: databaseUrl,
    REDIS_PREFIX: tag,
    API_KEYS: 'bench-api-key-0123456789',
    WORKSPACE_ROOT: workspaceRoot,
    // BENCH_LOG_LEVEL=info: what logging costs the route (its output goes to a pipe the bench drains).
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'silent',
    NODE_ENV: 'production',
  };
  try {
    // BENCH_PROFILE_DIR: a V8 CPU profile of the API process, for `--cpu-prof` hunting.
    const profileDir = process.env.BENCH_PROFILE_DIR;
    const r = await runIntakeBench(env, profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
    process.stdout.write(`${formatIntake(r)}\n`);
    if (r.mismatch) {
      process.exitCode = 1;
      process.stderr.write(`MISMATCH: ${r.mismatch}\n`);
    }
  } finally {
    await dropDatabase(databaseUrl);
    await dropRedisPrefix(config.redis.url, tag);
    rmSync(workspaceRoot, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
