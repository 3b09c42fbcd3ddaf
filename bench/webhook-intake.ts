/**
 * Plane intake throughput and latency: starts onceflow (API role, compiled dist) against a scratch
 * database, fires signed Plane `created` deliveries at concurrency 64 for ~10 s, 80 % of them
 * byte-identical retries of bodies already sent, and prints deliveries/s and p50/p99 latency.
 *
 *   npx tsc -p tsconfig.build.json && node dist/bench/webhook-intake.js
 *
 * Uses the local Postgres and Redis (DATABASE_URL's server, REDIS_URL); drops what it made.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import { configFromProcessEnv, processEnvironment } from '../src/config/env';
import { newWorkItem, PLANE_SECRET, sign, v1Body } from '../test/support/plane';

const CONCURRENCY = 64;
const DURATION_MS = 10_000;
const WARMUP_MS = 1_000;
const DUPLICATE_SHARE = 0.8;
const PLANE_PROJECTS = 4;
const SINGLE_MS = 3_000;

interface Sample {
  kind: 'new' | 'retry';
  status: number;
  ms: number;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => res(port));
    });
    srv.on('error', rej);
  });
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

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN;
}

async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [resolve(__dirname, '../src/main.js')], {
    env: { ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`onceflow exited early:\n${out}`);
    const ok = await fetch(`http://127.0.0.1:${port}/health/ready`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return { child, port };
    if (Date.now() > deadline) throw new Error(`onceflow not ready within 30 s:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function main(): Promise<void> {
  const tag = `bench_wh_${Date.now().toString(36)}_${randomBytes(2).toString('hex')}`;
  const base = new URL(configFromProcessEnv({ API_KEYS: 'bench-api-key-0123456789' }).databaseUrl);
  base.pathname = `/onceflow_${tag}`;
  const workspaceRoot = mkdtempSync(join(tmpdir(), 'onceflow-bench-wh-'));
  const env: Record<string, string> = {
    ...(processEnvironment() as Record<string, string>),
    DATABASE_URL: base.toString(),
    REDIS_PREFIX: tag,
    APP_ROLE: 'api',
    API_KEYS: 'bench-api-key-0123456789',
    PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
    WORKSPACE_ROOT: workspaceRoot,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
  };
  const config = configFromProcessEnv(env);
  const server = await startServer(env).catch(async (err: unknown) => {
    await cleanUp(config, tag, workspaceRoot);
    throw err;
  });
  const { child, port } = server;
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const projects = Array.from({ length: PLANE_PROJECTS }, () => randomUUID());
  const sent: Array<{ body: string; signature: string }> = [];
  let errors = 0;

  /** `concurrency` loops, each sending one delivery after another; samples after the warm-up. */
  async function phase(concurrency: number, warmupMs: number, durationMs: number): Promise<{ samples: Sample[]; seconds: number }> {
    const samples: Sample[] = [];
    const measureFrom = Date.now() + warmupMs;
    const stopAt = measureFrom + durationMs;
    const loop = async (): Promise<void> => {
      while (Date.now() < stopAt) {
        const retry = sent.length > 0 && Math.random() < DUPLICATE_SHARE;
        let delivery: { body: string; signature: string };
        if (retry) delivery = sent[Math.floor(Math.random() * sent.length)];
        else {
          const body = v1Body(newWorkItem({ project: projects[sent.length % PLANE_PROJECTS], name: `Bench item ${sent.length}` }), 'created');
          delivery = { body, signature: sign(body) };
          sent.push(delivery);
        }
        const t0 = process.hrtime.bigint();
        try {
          const status = await post(agent, port, delivery.body, delivery.signature);
          if (Date.now() >= measureFrom) samples.push({ kind: retry ? 'retry' : 'new', status, ms: Number(process.hrtime.bigint() - t0) / 1e6 });
        } catch {
          errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
    return { samples, seconds: (Date.now() - measureFrom) / 1000 };
  }

  try {
    // Unloaded first (what one delivery costs), then the load the issue asks about.
    const single = await phase(1, 500, SINGLE_MS);
    const { samples, seconds: elapsed } = await phase(CONCURRENCY, WARMUP_MS, DURATION_MS);
    const pg = new Client({ connectionString: config.databaseUrl });
    await pg.connect();
    const { rows } = await pg.query(
      `SELECT (SELECT count(*) FROM tasks)::int AS tasks, (SELECT count(*) FROM runs)::int AS runs,
              (SELECT count(*) FROM webhook_deliveries)::int AS deliveries, (SELECT coalesce(sum(duplicate_count), 0)::int FROM webhook_deliveries) AS dups`,
    );
    await pg.end();
    const report = (label: string, s: Sample[]) => {
      const ms = s.map((x) => x.ms).sort((a, b) => a - b);
      return `${label.padEnd(8)} n=${String(s.length).padStart(6)}  p50=${pct(ms, 50).toFixed(2)} ms  p99=${pct(ms, 99).toFixed(2)} ms  max=${ms[ms.length - 1]?.toFixed(2)} ms`;
    };
    const byStatus = samples.reduce<Record<number, number>>((acc, s) => ({ ...acc, [s.status]: (acc[s.status] ?? 0) + 1 }), {});
    process.stdout.write(
      [
        `Plane intake bench: concurrency ${CONCURRENCY}, ${DURATION_MS / 1000} s measured after ${WARMUP_MS / 1000} s warm-up, ${DUPLICATE_SHARE * 100} % retries`,
        `deliveries/s: ${(samples.length / elapsed).toFixed(0)}  (HTTP status counts ${JSON.stringify(byStatus)}, client errors ${errors})`,
        report('all', samples),
        report(
          'new',
          samples.filter((s) => s.kind === 'new'),
        ),
        report(
          'retry',
          samples.filter((s) => s.kind === 'retry'),
        ),
        `unloaded (concurrency 1, ${SINGLE_MS / 1000} s): ${(single.samples.length / single.seconds).toFixed(0)} deliveries/s`,
        report(
          '  new',
          single.samples.filter((s) => s.kind === 'new'),
        ),
        report(
          '  retry',
          single.samples.filter((s) => s.kind === 'retry'),
        ),
        `database: ${rows[0].tasks} tasks, ${rows[0].runs} runs, ${rows[0].deliveries} deliveries (${sent.length} distinct bodies sent), ${rows[0].dups} duplicates counted`,
        '',
      ].join('\n'),
    );
    if (rows[0].tasks !== sent.length || rows[0].runs !== sent.length || rows[0].deliveries !== sent.length) {
      process.exitCode = 1;
      process.stderr.write('MISMATCH: expected one task, run and delivery row per distinct body\n');
    }
  } finally {
    agent.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await cleanUp(config, tag, workspaceRoot);
  }
}

/** Drops the scratch database, the Redis keys under the bench's prefix and the workspaces. */
async function cleanUp(config: { databaseUrl: string; redisUrl: string }, tag: string, workspaceRoot: string): Promise<void> {
  const admin = new URL(config.databaseUrl);
  admin.pathname = '/postgres';
  const pg = new Client({ connectionString: admin.toString() });
  await pg.connect();
  await pg.query(`DROP DATABASE IF EXISTS "onceflow_${tag}" WITH (FORCE)`);
  await pg.end();
  const redis = new Redis(config.redisUrl);
  for await (const keys of redis.scanStream({ match: `${tag}*`, count: 1000 }))
    if ((keys as string[]).length) await redis.unlink(...(keys as string[]));
  await redis.quit();
  rmSync(workspaceRoot, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
