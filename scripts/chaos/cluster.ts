import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { Client, Pool } from 'pg';
import { prepareDatabase } from '../../src/database/prepare-database';
import { BOT_ACTOR, PLANE_SECRET } from '../../test/support/plane';
import { LlmStub } from '../../test/support/llm-stub';
import { SlackStub } from '../../test/support/slack-stub';
import { AppProcess, Role } from './app-process';
import { ApiClient } from './client';
import { PeerTracker } from './peer';
import { RunnerLag, StallProbe } from './stall-probe';
import { repoRoot } from './util';
import { Witness } from './witness';

export interface Fault {
  atMs: number;
  kind: 'kill' | 'freeze' | 'thaw' | 'stall' | 'wipe-redis' | 'terminate-pg';
  label?: string;
  pid?: number;
  /** kill/freeze: how many commands of the victim were alive at that moment (the witness's count). */
  held?: number;
  /** freeze: when it was thawed; stall: when the worker answered again. */
  untilMs?: number;
}

export interface ClusterOptions {
  /** Scenario name: part of the database name, the Redis prefix and the scratch directory. */
  name: string;
  workers: number;
  /** Overrides of the fast defaults below. */
  env?: Record<string, string>;
}

const DEFAULT_DB = 'postgres://postgres@127.0.0.1:5432/onceflow';
const DEFAULT_REDIS = 'redis://127.0.0.1:6379/0';

/** Short timings, so that a dead or frozen holder is noticed within seconds (contract: tuning knobs). */
const FAST = {
  NODE_ENV: 'test',
  LOG_LEVEL: 'warn',
  WORKER_CONCURRENCY: '4',
  RUN_LOCK_TTL_MS: '1500',
  QUEUE_LOCK_DURATION_MS: '1500',
  QUEUE_STALLED_INTERVAL_MS: '1000',
  RUN_RETRY_BASE_DELAY_MS: '100',
  RUN_RETRY_MAX_DELAY_MS: '1000',
  INFRA_RETRY_BASE_DELAY_MS: '100',
  INFRA_RETRY_MAX_DELAY_MS: '1000',
  RUN_MAX_ATTEMPTS: '10',
  RUN_TIMEOUT_MS: '60000',
  RECONCILE_INTERVAL_MS: '1000',
  NOTIFY_RETRY_BASE_DELAY_MS: '100',
  NOTIFY_MAX_ATTEMPTS: '10',
  PLANE_PROJECT_MAX_CONCURRENT_RUNS: '8',
};

/**
 * A scenario's own world: a scratch database (created, dropped), a Redis key prefix (wiped at the
 * end), a scratch directory (execution file, workspaces, process logs), a local Slack stub, and
 * the real app as separate processes — 1 API, N workers, 1 scheduler.
 */
export class Cluster {
  readonly id = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  readonly dir: string;
  readonly dbName: string;
  readonly dbUrl: string;
  readonly redisUrl: string;
  readonly prefix: string;
  readonly execFile: string;
  /** What the steps of multi-step runs append (test/support/steps-orchestrator.sh). */
  readonly stepsFile: string;
  /** Where each command holds its flock while it lives (the witness waits on it). */
  readonly lockDir: string;
  readonly apiKey = `chaos_${randomBytes(16).toString('hex')}`;
  readonly witness: Witness;
  /** Which worker holds each connection to the Slack stub (the kernel's answer, remembered). */
  readonly peers = new PeerTracker(
    () => Number(new URL(this.slack.url).port),
    () => this.workers.filter((w) => w.running).map((w) => w.pid),
  );
  readonly pg: Pool;
  readonly redis: Redis;
  slack!: SlackStub;
  /** A stand-in LLM provider behind every worker's caching proxy: counts the calls that reached "OpenAI". */
  llm!: LlmStub;
  api!: AppProcess;
  scheduler!: AppProcess;
  workers: AppProcess[] = [];
  client!: ApiClient;
  restarts = 0;
  /** Every fault injected, with its wall-clock time: the checker attributes effects to causes. */
  readonly faults: Fault[] = [];
  /** How late this process itself ran (its clock for the stub and the probes). */
  readonly lag = new RunnerLag();
  /** Workers that did not answer for longer than a third of the lock TTL: stalls nobody injected. */
  stallProbe: StallProbe | undefined;

  private constructor(readonly opts: ClusterOptions) {
    this.dir = mkdtempSync(join(tmpdir(), `onceflow-chaos-${opts.name}-`));
    mkdirSync(join(this.dir, 'logs'));
    const url = new URL(process.env.CHAOS_DATABASE_URL ?? process.env.DATABASE_URL ?? DEFAULT_DB);
    this.dbName = `onceflow_chaos_${opts.name.replace(/\W/g, '_')}_${this.id}`;
    url.pathname = `/${this.dbName}`;
    this.dbUrl = url.toString();
    this.redisUrl = process.env.CHAOS_REDIS_URL ?? process.env.REDIS_URL ?? DEFAULT_REDIS;
    this.prefix = `onceflow_chaos_${opts.name}_${this.id}`;
    this.execFile = join(this.dir, 'executions.log');
    this.stepsFile = join(this.dir, 'steps.log');
    this.lockDir = join(this.dir, 'locks');
    mkdirSync(this.lockDir);
    // Run commands execute as an unprivileged user (RUN_AS_USER): they append to the execution file,
    // take their locks here and run copies of the test orchestrators anyone may read, wherever the
    // repository was cloned.
    for (const d of [this.dir, this.lockDir]) chmodSync(d, 0o777);
    for (const f of ['fake-orchestrator.sh', 'steps-orchestrator.sh', 'llm-call.js']) {
      copyFileSync(join(repoRoot(), 'test/support', f), join(this.dir, f));
      chmodSync(join(this.dir, f), 0o755);
    }
    this.witness = new Witness(this.execFile);
    // Our own reads use another application_name, so pg_terminate_backend spares them.
    this.pg = new Pool({ connectionString: this.dbUrl, max: 3, application_name: 'onceflow-chaos' });
    this.redis = new Redis(this.redisUrl, { maxRetriesPerRequest: 3 });
  }

  static async start(opts: ClusterOptions): Promise<Cluster> {
    const c = new Cluster(opts);
    c.lag.start();
    try {
      // Who posted each message is asked of the kernel (the TCP peer's process), not of the app.
      c.slack = await SlackStub.start({ identify: (peer) => c.peers.owner(peer) });
      c.peers.start(100);
      c.llm = await LlmStub.start();
      // Migrate once up front: the processes then start without queueing on the advisory lock.
      await prepareDatabase(c.dbUrl);
      c.witness.start();
      c.api = await c.spawn('api', 'api');
      c.client = new ApiClient(c.api.url, c.apiKey);
      c.workers = Array.from({ length: opts.workers }, (_, i) => c.makeProcess(`worker-${i + 1}`, 'worker'));
      c.scheduler = c.makeProcess('scheduler', 'scheduler');
      await Promise.all([...c.workers, c.scheduler].map((p) => p.start()));
      // A heartbeat later than a third of the TTL loses the lock (src/locks/heartbeat.ts).
      c.stallProbe = new StallProbe(() => c.workers, c.lag, c.lockTtlMs / 3).start();
      return c;
    } catch (err) {
      await c.destroy(false);
      throw err;
    }
  }

  get env(): Record<string, string> {
    return {
      ...FAST,
      DATABASE_URL: this.dbUrl,
      REDIS_URL: this.redisUrl,
      REDIS_PREFIX: this.prefix,
      API_KEYS: this.apiKey,
      PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      PLANE_BOT_ACTOR_IDS: BOT_ACTOR,
      SLACK_WEBHOOK_URL: this.slack.url,
      // A requirement with steps=N runs the steps orchestrator inside (its steps write to steps.log).
      ORCHESTRATOR_COMMAND: `sh '${join(this.dir, 'fake-orchestrator.sh')}' '${this.execFile}' '${this.lockDir}' '${this.stepsFile}'`,
      LLM_OPENAI_UPSTREAM: this.llm.openaiUrl,
      WORKSPACE_ROOT: join(this.dir, 'workspaces'),
      ...this.opts.env,
    };
  }

  get reconcileIntervalMs(): number {
    return Number(this.env.RECONCILE_INTERVAL_MS);
  }

  get lockTtlMs(): number {
    return Number(this.env.RUN_LOCK_TTL_MS);
  }

  private makeProcess(label: string, role: Role): AppProcess {
    return new AppProcess(label, role, this.env, join(this.dir, 'logs', `${label}.log`));
  }

  private spawn(label: string, role: Role): Promise<AppProcess> {
    return this.makeProcess(label, role).start();
  }

  liveWorkers(): AppProcess[] {
    return this.workers.filter((w) => w.running && w.ready && !w.frozen);
  }

  /** Every worker process ever started here: pid → label (a restarted worker has a new pid). */
  workerPids(): Map<number, string> {
    return new Map(this.workers.flatMap((w) => w.pids.map((pid) => [pid, w.label] as const)));
  }

  /** Live, unfrozen workers with the number of commands each has alive now — from the commands' records and the OS. */
  busyWorkers(): Array<{ worker: AppProcess; live: number }> {
    return this.liveWorkers()
      .map((worker) => ({ worker, live: this.witness.liveOf(worker.pid).length }))
      .filter((x) => x.live > 0);
  }

  /** The injected faults and the stalls seen, in time order. */
  allFaults(): Fault[] {
    return [...this.faults, ...this.stalls()].sort((a, b) => a.atMs - b.atMs);
  }

  /** Stalls the probe saw that were not one of our freezes (a freeze is judged by its own, stricter rule). */
  stalls(): Fault[] {
    const frozen = (s: { pid: number; atMs: number; untilMs: number }) =>
      this.faults.some(
        (f) => f.kind === 'freeze' && f.pid === s.pid && f.atMs <= s.untilMs && (f.untilMs ?? Infinity) >= s.atMs,
      );
    return (this.stallProbe?.stalls ?? []).filter((s) => !frozen(s)).map((s) => ({ kind: 'stall' as const, ...s }));
  }

  record(fault: Omit<Fault, 'atMs'>): void {
    const f = { atMs: Date.now(), ...fault };
    this.faults.push(f);
    appendFileSync(join(this.dir, 'faults.log'), `${JSON.stringify(f)}\n`);
  }

  /** kill -9; returns how many of its commands were alive at that moment. */
  async kill(p: AppProcess): Promise<number> {
    const held = this.witness.liveOf(p.pid).length;
    // Stopped first: from here it can open no connection and send nothing, so the scan below
    // names every Slack connection it will ever have held (a request it sent just before dying
    // may reach the stub only after its socket is gone), and the kill is recorded no later than
    // the moment it stopped acting.
    p.freeze();
    this.record({ kind: 'kill', label: p.label, pid: p.pid, held });
    this.peers.scan();
    await p.kill();
    return held;
  }

  /** SIGSTOP; returns how many of its commands were alive at that moment. */
  freeze(p: AppProcess): number {
    const held = this.witness.liveOf(p.pid).length;
    this.record({ kind: 'freeze', label: p.label, pid: p.pid, held });
    p.freeze();
    return held;
  }

  thaw(p: AppProcess): void {
    this.record({ kind: 'thaw', label: p.label, pid: p.pid });
    p.thaw();
    const freeze = this.faults.findLast((f) => f.kind === 'freeze' && f.pid === p.pid);
    if (freeze) freeze.untilMs = Date.now();
  }

  async restart(p: AppProcess): Promise<void> {
    // A loaded 2-core box can take a minute to boot a process; that is slow, not a violation.
    await p.start(120_000);
    this.restarts++;
  }

  /** Deletes every key of this scenario's prefix, as a Redis restart without persistence would. */
  async wipeRedis(): Promise<number> {
    this.record({ kind: 'wipe-redis' });
    return this.deletePrefixKeys();
  }

  private async deletePrefixKeys(): Promise<number> {
    let n = 0;
    for await (const keys of this.redis.scanStream({ match: `${this.prefix}:*`, count: 1000 })) {
      if ((keys as string[]).length) n += await this.redis.del(...(keys as string[]));
    }
    return n;
  }

  /** Terminates the app's Postgres connections to this scenario's database (none of ours). */
  async terminatePg(): Promise<number> {
    this.record({ kind: 'terminate-pg' });
    const { rows } = await this.pg.query(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = $1 AND application_name = 'onceflow' AND pid <> pg_backend_pid()`,
      [this.dbName],
    );
    return rows[0].n;
  }

  async stopProcesses(): Promise<void> {
    await Promise.all([...this.workers, this.scheduler, this.api].filter(Boolean).map((p) => p.stop()));
  }

  /** Stops everything and drops the database and Redis keys; keeps the directory when asked (evidence). */
  async destroy(keepDir: boolean): Promise<void> {
    await this.stallProbe?.stop();
    this.lag.stop();
    await this.stopProcesses().catch(() => undefined);
    this.witness.stop();
    this.peers.stop();
    await this.slack?.close().catch(() => undefined);
    await this.llm?.close().catch(() => undefined);
    await this.pg.end().catch(() => undefined);
    if (!process.env.CHAOS_KEEP_DB) {
      await this.deletePrefixKeys().catch(() => undefined);
      const url = new URL(this.dbUrl);
      url.pathname = '/postgres';
      const admin = new Client({ connectionString: url.toString() });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${this.dbName}" WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    }
    await this.redis.quit().catch(() => undefined);
    if (!keepDir) rmSync(this.dir, { recursive: true, force: true });
  }
}
