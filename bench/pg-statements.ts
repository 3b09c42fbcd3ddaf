/**
 * BENCH_PG_STATEMENTS=1: where a phase's Postgres time goes, statement by statement, from
 * pg_stat_statements. The server must load it (`shared_preload_libraries = 'pg_stat_statements'`,
 * then a restart); without it the bench says why in one line and measures as usual. The extension
 * is created in the scratch database only, which the bench drops at the end.
 *
 * Per statement of the scratch database, over the phase (its warm-up included): calls, rows per
 * call, execution and planning time per call (planning reads 0 unless
 * `pg_stat_statements.track_planning` is on), and its share of the phase's total. These times are
 * the backends' own clock, waits for locks and for a CPU included: they rank the statements and
 * show which plan on every call; the CPU per run or delivery is in the phase's own figures.
 */
import { Client } from 'pg';

/** Statements printed per phase (by total time). */
const TOP = 8;

const STATEMENTS = `
  SELECT calls::int, rows::bigint, total_exec_time AS exec_ms, total_plan_time AS plan_ms,
         regexp_replace(query, '\\s+', ' ', 'g') AS query
    FROM pg_stat_statements
   WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls > 0
   ORDER BY total_exec_time + total_plan_time DESC`;

interface StatementRow {
  calls: number;
  rows: string;
  exec_ms: number;
  plan_ms: number;
  query: string;
}

/** Runs `phase`; with BENCH_PG_STATEMENTS=1, prints what its statements cost Postgres. */
export async function withPgStatements<T>(
  databaseUrl: string,
  label: string,
  log: (line: string) => void,
  phase: () => Promise<T>,
): Promise<T> {
  if (process.env.BENCH_PG_STATEMENTS !== '1') return phase();
  const pg = new Client({ connectionString: databaseUrl });
  await pg.connect();
  try {
    const unavailable = await startCounting(pg);
    if (unavailable) {
      log(`  Postgres statements of ${label}: not available (${unavailable})`);
      return await phase();
    }
    const result = await phase();
    const { rows } = await pg.query<StatementRow>(STATEMENTS);
    // The bench's own reads (checks, polls) are in the list too; they are few and say so by their text.
    const total = rows.reduce((a, r) => a + r.exec_ms + r.plan_ms, 0);
    log(`  Postgres statements of ${label}: ${rows.length}, ${(total / 1000).toFixed(1)} s of backend time in all`);
    for (const r of rows.slice(0, TOP)) log(`    ${describe(r, total)}`);
    return result;
  } finally {
    await pg.end();
  }
}

/** Zeroes this database's counters; answers why it cannot (the module not loaded), or null. */
async function startCounting(pg: Client): Promise<string | null> {
  try {
    await pg.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    // This database only: the server's other databases (it may be shared) keep their counters.
    await pg.query(
      'SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)',
    );
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

function describe(r: StatementRow, total: number): string {
  const share = ((100 * (r.exec_ms + r.plan_ms)) / Math.max(total, 1e-9)).toFixed(0).padStart(3);
  const perCall = (ms: number) => (ms / r.calls).toFixed(3);
  const rowsPerCall = (Number(r.rows) / r.calls).toFixed(1);
  return (
    `${share} %  ${String(r.calls).padStart(6)} calls  ${rowsPerCall.padStart(5)} rows/call  ` +
    `exec ${perCall(r.exec_ms)} + plan ${perCall(r.plan_ms)} ms/call  ${r.query.slice(0, 90)}`
  );
}
