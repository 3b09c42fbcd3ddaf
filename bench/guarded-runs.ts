/**
 * onceflow guarded runs/s: PENDING runs are dispatched from this process (the real
 * DispatchService: producer guard → conditional PENDING→QUEUED → Bull add), each one TWICE at
 * once, and executed by `node dist/src/main.js` worker processes (APP_ROLE=worker,
 * RUN_EXECUTOR=noop): run lock + heartbeat → claim transaction → no-op → fenced finalize with its
 * outbox row. The clock stops at the last run's finished_at. Then Postgres is asked whether any
 * run was claimed (= executed) more than once.
 */
import type { DataSource } from 'typeorm';
import type { DispatchService } from '../src/runs/dispatch.service';
import { AppProcess, cpuMs, MachineCpu, machineCpu, pool, serviceCpu, sleep, startApp } from './support';

export interface GuardedResult {
  workers: number;
  runs: number;
  seconds: number;
  runsPerSec: number;
  dispatchSeconds: number;
  /** Dispatch calls answered 202; must equal `runs` (the twin call gets a 409). */
  dispatchAccepted: number;
  /** Runs not SUCCESS at the end (lost or stuck), the warm-up's included. */
  notSucceeded: number;
  /** Executions beyond the first, summed over runs (claims to RUNNING and attempts above 1), the warm-up's included. */
  duplicatesExecuted: number;
  /** Runs without exactly one outbox row. */
  outboxMismatches: number;
  workerPeakRssMb: Array<number | null>;
  /** CPU ms the worker processes used per run (all of them together); null off Linux. */
  workerCpuMsPerRun: number | null;
  /** CPU ms this process (the dispatching producer) used per run. */
  producerCpuMsPerRun: number;
  /** CPU ms of the Postgres backends serving the scratch database, per run. */
  postgresCpuMsPerRun: number | null;
  /** CPU ms of the whole Redis server per run (shared: other users add to it). */
  redisCpuMsPerRun: number;
  /** Finalizes per finalize statement (group commit), from the workers' /metrics. */
  finalizesPerStatement: number;
  claimsPerRoundTrip: number;
  /** The whole machine over the measured window (every process: is there CPU left for more?). */
  machine: MachineCpu | null;
  /**
   * Runs dispatched (each twice) and executed by the same worker processes before the clock started,
   * their own rate (the cold start: code not yet optimised, pools growing) and their 202s.
   */
  warmup: { runs: number; runsPerSec: number | null; dispatchAccepted: number };
}

export interface GuardedSetup {
  ds: DataSource;
  dispatcher: DispatchService;
  databaseUrl: string;
  redisUrl: string;
  workerEnv: Record<string, string>;
  producerConcurrency: number;
  /** Extra node arguments for the worker processes (profiling: `--cpu-prof`). */
  workerNodeArgs?: string[];
}

export async function measureGuarded(
  s: GuardedSetup,
  runIds: string[],
  workers: number,
  warmIds: string[] = [],
): Promise<GuardedResult> {
  const procs: AppProcess[] = [];
  try {
    for (const p of await Promise.all(Array.from({ length: workers }, () => startApp(s.workerEnv, s.workerNodeArgs))))
      procs.push(p);
    // Two dispatches of the same run at once: the producer guard or the conditional
    // PENDING→QUEUED must turn one of them away, and the run must still execute once.
    const dispatchPairs = async (ids: string[]): Promise<number> => {
      let accepted = 0;
      await pool(ids.length, s.producerConcurrency, async (i) => {
        const answers = await Promise.all([
          s.dispatcher.dispatchOrRefuse(ids[i]),
          s.dispatcher.dispatchOrRefuse(ids[i]),
        ]);
        accepted += answers.filter((a) => 'status' in a).length;
      });
      return accepted;
    };
    // The warm-up: the same load through the same processes, not measured (code V8 has not
    // optimised yet, pools still growing). Its runs are checked like the measured ones.
    let warmup: GuardedResult['warmup'] = { runs: 0, runsPerSec: null, dispatchAccepted: 0 };
    if (warmIds.length > 0) {
      const w0 = Date.now();
      const dispatchAccepted = await dispatchPairs(warmIds);
      await settled(s.ds, warmIds);
      warmup = {
        runs: warmIds.length,
        runsPerSec: (warmIds.length / ((await lastFinished(s.ds, warmIds)) - w0)) * 1000,
        dispatchAccepted,
      };
    }
    const finalizes0 = await Promise.all(procs.map((p) => batchSizes(p.port, 'onceflow_finalize_batch_size')));
    const claims0 = await Promise.all(procs.map((p) => batchSizes(p.port, 'onceflow_claim_batch_size')));
    const workerCpu0 = procs.map((p) => cpuMs(p.child.pid));
    const producerCpu0 = process.cpuUsage();
    const services = await serviceCpu(s.databaseUrl, s.redisUrl);
    const machine = machineCpu();
    const t0 = Date.now();
    const accepted = await dispatchPairs(runIds);
    const dispatchSeconds = (Date.now() - t0) / 1000;
    await settled(s.ds, runIds);
    const machineUsed = machine();
    const seconds = ((await lastFinished(s.ds, runIds)) - t0) / 1000;
    const producerCpu = process.cpuUsage(producerCpu0);
    const { postgresMs, redisMs } = await services();
    const workerCpu = procs.map((p, i) => (workerCpu0[i] === null ? null : cpuMs(p.child.pid)! - workerCpu0[i]!));
    const workerCpuMsPerRun = workerCpu.includes(null) ? null : workerCpu.reduce((a, b) => a! + b!, 0)! / runIds.length;
    const workerPeakRssMb = procs.map((p) => p.peakRssMb());
    const finalizes = await Promise.all(procs.map((p) => batchSizes(p.port, 'onceflow_finalize_batch_size')));
    const claims = await Promise.all(procs.map((p) => batchSizes(p.port, 'onceflow_claim_batch_size')));
    const check = await verify(s.ds, [...warmIds, ...runIds]);
    return {
      workers,
      runs: runIds.length,
      seconds,
      runsPerSec: runIds.length / seconds,
      dispatchSeconds,
      dispatchAccepted: accepted,
      ...check,
      workerPeakRssMb,
      workerCpuMsPerRun,
      producerCpuMsPerRun: (producerCpu.user + producerCpu.system) / 1000 / runIds.length,
      postgresCpuMsPerRun: postgresMs === null ? null : postgresMs / runIds.length,
      redisCpuMsPerRun: redisMs / runIds.length,
      finalizesPerStatement: perStatement(since(finalizes, finalizes0)),
      claimsPerRoundTrip: perStatement(since(claims, claims0)),
      machine: machineUsed,
      warmup,
    };
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
}

/**
 * Waits until none of `ids` is unfinished: a cheap poll, and not a frequent one (the clock stops at
 * finished_at, not at the poll). After two minutes it gives up: what is left counts as not succeeded.
 */
async function settled(ds: DataSource, ids: string[]): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const [{ n }] = await ds.query(
      `SELECT count(*)::int AS n FROM runs WHERE id = ANY($1) AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')`,
      [ids],
    );
    if (n === 0 || Date.now() > deadline) return;
    await sleep(100);
  }
}

/** When the last of `ids` finished, in ms since the epoch. */
async function lastFinished(ds: DataSource, ids: string[]): Promise<number> {
  const [{ last }] = await ds.query(
    `SELECT (EXTRACT(EPOCH FROM max(finished_at)) * 1000)::float8 AS last FROM runs WHERE id = ANY($1)`,
    [ids],
  );
  return Number(last);
}

/** Histogram counts of the measured window: the figures now less those before it. */
function since(
  now: Array<{ statements: number; rows: number }>,
  before: Array<{ statements: number; rows: number }>,
): Array<{ statements: number; rows: number }> {
  return now.map((b, i) => ({ statements: b.statements - before[i].statements, rows: b.rows - before[i].rows }));
}

/** A worker's batched statements and the requests they carried, from one batch-size histogram. */
async function batchSizes(port: number, metric: string): Promise<{ statements: number; rows: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { statements: value(`${metric}_count`), rows: value(`${metric}_sum`) };
}

function perStatement(batches: Array<{ statements: number; rows: number }>): number {
  const statements = batches.reduce((a, b) => a + b.statements, 0);
  return batches.reduce((a, b) => a + b.rows, 0) / Math.max(1, statements);
}

async function verify(
  ds: DataSource,
  runIds: string[],
): Promise<Pick<GuardedResult, 'notSucceeded' | 'duplicatesExecuted' | 'outboxMismatches'>> {
  const [row] = await ds.query(
    `WITH r AS (SELECT id, status, attempts FROM runs WHERE id = ANY($1)),
          claims AS (SELECT run_id, count(*) AS c FROM run_events WHERE run_id = ANY($1) AND to_status = 'RUNNING' GROUP BY run_id),
          outbox AS (SELECT run_id, count(*) AS c FROM notification_logs WHERE run_id = ANY($1) GROUP BY run_id)
     SELECT (SELECT count(*) FROM r WHERE status <> 'SUCCESS')::int AS not_succeeded,
            (SELECT coalesce(sum(greatest(c - 1, 0)), 0) FROM claims)::int AS extra_claims,
            (SELECT coalesce(sum(greatest(attempts - 1, 0)), 0) FROM r)::int AS extra_attempts,
            (SELECT count(*) FROM r LEFT JOIN outbox o ON o.run_id = r.id WHERE coalesce(o.c, 0) <> 1)::int AS outbox_mismatches`,
    [runIds],
  );
  return {
    notSucceeded: row.not_succeeded,
    duplicatesExecuted: Math.max(row.extra_claims, row.extra_attempts),
    outboxMismatches: row.outbox_mismatches,
  };
}

/** PENDING runs spread round-robin over `projectIds` (not timed: creation is reported apart). */
export async function createRuns(
  create: (projectId: string, requirement: string) => Promise<{ id: string }>,
  projectIds: string[],
  n: number,
  concurrency: number,
): Promise<{ ids: string[]; perSec: number }> {
  const ids: string[] = new Array(n);
  const t0 = Date.now();
  await pool(n, concurrency, async (i) => {
    ids[i] = (await create(projectIds[i % projectIds.length], `bench run ${i}\nno-op`)).id;
  });
  return { ids, perSec: n / ((Date.now() - t0) / 1000) };
}
