/**
 * Shared pieces of the benchmarks: app processes, a bounded-concurrency loop, percentiles,
 * peak RSS, the machine description and the clean-up of a scratch database and key prefix.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { AddressInfo, createServer } from 'node:net';
import { cpus, loadavg, totalmem } from 'node:os';
import { resolve } from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';

export const MAIN_JS = resolve(__dirname, '../src/main.js');
/** The V8 flags `npm start` and the Dockerfile run the app with: the bench measures the app as shipped. */
export const APP_NODE_FLAGS = ['--max-old-space-size=512', '--max-semi-space-size=16'];

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => res(port));
    });
    srv.on('error', rej);
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Runs `work(i)` for i in [0, n) with at most `concurrency` in flight. */
export async function pool(n: number, concurrency: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const loop = async (): Promise<void> => {
    while (next < n) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, loop));
}

/** Nearest-rank percentile of an ascending array. */
export function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN;
}

/**
 * Peak resident set size of a live process in MB: the kernel's high-water mark (VmHWM), so a
 * short spike between two samples is not missed. Linux only; null elsewhere or once it exited.
 */
export function peakRssMb(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch {
    return null;
  }
}

/**
 * CPU time (user + system) a live process has used so far, in ms; null off Linux. CPU time per
 * run is steadier than runs/s on a shared machine: a busy neighbour slows us without adding to it.
 */
export function cpuMs(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime (fields 14 and 15 of stat), in clock ticks of 1/100 s on Linux.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/** The whole machine's CPU over a window, all cores together (from /proc/stat). */
export interface MachineCpu {
  /** Share of the window's core time that was busy: user, nice, system, irq and softirq. */
  busyShare: number;
  /** Share the hypervisor gave to other guests (steal): time none of our processes could use. */
  stealShare: number;
  /** Busy CPU ms of every process and of the kernel, in all. */
  busyMs: number;
}

function procStatCpu(): number[] | null {
  try {
    // "cpu  user nice system idle iowait irq softirq steal guest guest_nice", in ticks of 1/100 s.
    return readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  } catch {
    return null;
  }
}

/**
 * Starts a window on the machine's CPU; the returned function ends it (null off Linux). A phase
 * whose machine is busy ~100 % of its time has no spare CPU: another process can only take from
 * the others, and a rate ratio between two such phases is the inverse of their CPU per request.
 */
export function machineCpu(): () => MachineCpu | null {
  const t0 = procStatCpu();
  return () => {
    const t1 = procStatCpu();
    if (!t0 || !t1) return null;
    const d = t1.map((v, i) => v - t0[i]);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = d;
    const busy = user + nice + system + irq + softirq;
    const all = busy + idle + iowait + steal;
    return all > 0 ? { busyShare: busy / all, stealShare: steal / all, busyMs: busy * 10 } : null;
  };
}

/** "busy 97 % (steal 1 %)", for a log line. */
export function busyText(m: MachineCpu | null): string {
  return m
    ? `busy ${(m.busyShare * 100).toFixed(0)} % of ${cpus().length} cores (steal ${(m.stealShare * 100).toFixed(0)} %)`
    : 'busy ?';
}

export interface AppProcess {
  child: ChildProcess;
  port: number;
  /** Peak RSS so far (read it before stop()). */
  peakRssMb(): number | null;
  stop(): Promise<void>;
}

/**
 * Starts `node dist/src/main.js` with `env` and waits for /health/ready (30 s, the contract's
 * limit). `nodeArgs` go before the script (e.g. `--cpu-prof`, which NODE_OPTIONS refuses).
 */
export async function startApp(env: Record<string, string>, nodeArgs: string[] = []): Promise<AppProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [...APP_NODE_FLAGS, ...nodeArgs, MAIN_JS], {
    env: { ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out = (out + c).slice(-20_000)));
  child.stderr!.on('data', (c) => (out = (out + c).slice(-20_000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 20_000)))]);
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`onceflow (${env.APP_ROLE}) exited early:\n${out}`);
    const ok = await fetch(`http://127.0.0.1:${port}/health/ready`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return { child, port, peakRssMb: () => peakRssMb(child.pid), stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`onceflow (${env.APP_ROLE}) not ready within 30 s:\n${out}`);
    }
    await sleep(100);
  }
}

export interface Machine {
  cpuModel: string;
  cores: number;
  memoryGb: number;
  node: string;
  platform: string;
  postgres: string | null;
  redis: string | null;
}

export async function machine(databaseUrl: string, redisUrl: string): Promise<Machine> {
  const pg = new Client({ connectionString: databaseUrl });
  await pg.connect();
  const { rows } = await pg.query<{ v: string }>(`SELECT current_setting('server_version') AS v`);
  await pg.end();
  const redis = new Redis(redisUrl, { lazyConnect: true });
  await redis.connect();
  const info = await redis.info('server');
  await redis.quit();
  return {
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    cores: cpus().length,
    memoryGb: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    postgres: rows[0]?.v ?? null,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? null,
  };
}

export function load(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}

/** URL of `databaseUrl`'s server with another database name. */
export function withDatabase(databaseUrl: string, name: string): string {
  const u = new URL(databaseUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Drops the scratch database (FORCE: stray connections of a crashed phase don't block it). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const name = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  const pg = new Client({ connectionString: withDatabase(databaseUrl, 'postgres') });
  await pg.connect();
  try {
    await pg.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '""')}" WITH (FORCE)`);
  } finally {
    await pg.end();
  }
}

/** Deletes every Redis key under the bench's own prefix. */
export async function dropRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 })) {
      if ((keys as string[]).length) await redis.unlink(...(keys as string[]));
    }
  } finally {
    await redis.quit();
  }
}

/**
 * CPU used by the Postgres backends serving `databaseUrl` (sampled by pid at both ends: the
 * pools are warm, so they barely change) and by the Redis server (all of it: other users of the
 * same Redis count too). Linux only for Postgres; null where unknown.
 */
export async function serviceCpu(
  databaseUrl: string | null,
  redisUrl: string,
): Promise<() => Promise<{ postgresMs: number | null; redisMs: number }>> {
  const pg = databaseUrl ? new Client({ connectionString: databaseUrl }) : null;
  await pg?.connect();
  const redis = new Redis(redisUrl);
  const backends = async (): Promise<number[]> =>
    pg
      ? (
          await pg.query<{ pid: number }>(
            'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
          )
        ).rows.map((r) => r.pid)
      : [];
  const redisCpu = async (): Promise<number> => {
    const info = await redis.info('cpu');
    const f = (k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(info)?.[1] ?? 0);
    return (f('used_cpu_sys') + f('used_cpu_user')) * 1000;
  };
  const before = new Map<number, number | null>((await backends()).map((pid) => [pid, cpuMs(pid)]));
  const redis0 = await redisCpu();
  return async () => {
    let postgresMs = 0;
    for (const pid of new Set([...before.keys(), ...(await backends())])) {
      const now = cpuMs(pid);
      if (now === null) continue; // gone: its last share is lost, a small undercount
      postgresMs += now - (before.get(pid) ?? 0);
    }
    const redisMs = (await redisCpu()) - redis0;
    await pg?.end();
    redis.disconnect();
    return { postgresMs: cpuMs(process.pid) === null ? null : postgresMs, redisMs };
  };
}
