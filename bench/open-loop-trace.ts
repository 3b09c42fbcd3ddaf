/**
 * BENCH_OPEN_TRACE=1: a timeline of the open loop, for finding out what its first seconds wait on.
 * Every 250 ms: deliveries answered, deliveries in flight, the API process's CPU and this process's
 * (the client's) CPU, and what the API's Postgres backends are doing (pg_stat_activity of the
 * scratch database, grouped by wait event and state; for all but idle ones, the age of the oldest
 * transaction or query).
 * A server that answers few while its CPU is low waits on something; one that answers few at full
 * CPU is slow per delivery (code not yet optimised, too many sockets).
 */
import { Client } from 'pg';
import { cpuMs } from './support';

const EVERY_MS = 250;

const ACTIVITY = `
  SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu') || ' ' || state AS what, count(*)::int AS n,
         round(max(extract(epoch FROM now() - coalesce(xact_start, query_start))) FILTER (WHERE state <> 'idle') * 1000)::int AS oldest_ms
    FROM pg_stat_activity
   WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
   GROUP BY 1 ORDER BY 2 DESC`;

export interface OpenLoopTrace {
  /** One line per interval (the same lines on every call). */
  stop(): Promise<string[]>;
}

export async function startOpenLoopTrace(
  databaseUrl: string,
  apiPid: number | undefined,
  answered: () => number,
  inFlight: () => number,
): Promise<OpenLoopTrace> {
  const pg = new Client({ connectionString: databaseUrl });
  await pg.connect();
  const lines: string[] = [];
  const t0 = performance.now();
  let last = { at: t0, answered: answered(), api: cpuMs(apiPid) ?? 0, self: process.cpuUsage() };
  let sampling: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (sampling) return; // the sample before is still reading Postgres: skip, never pile up
    sampling = (async () => {
      const at = performance.now();
      const api = cpuMs(apiPid) ?? 0;
      const self = process.cpuUsage(last.self);
      const n = answered();
      const activity = await pg.query<{ what: string; n: number; oldest_ms: number | null }>(ACTIVITY).then(
        (r) => r.rows.map((a) => `${a.what}=${a.n}${a.oldest_ms ? ` (${a.oldest_ms} ms)` : ''}`).join(', '),
        (err: Error) => `pg_stat_activity: ${err.message}`,
      );
      const ms = at - last.at;
      const pctOf = (cpu: number) => `${((cpu / ms) * 100).toFixed(0).padStart(3)} %`;
      lines.push(
        `${((at - t0) / 1000).toFixed(2).padStart(6)} s  answered ${String(n - last.answered).padStart(4)}` +
          `  in flight ${String(inFlight()).padStart(5)}  API CPU ${pctOf(api - last.api)}` +
          `  client CPU ${pctOf((self.user + self.system) / 1000)}  backends: ${activity || 'none'}`,
      );
      last = { at, answered: n, api, self: process.cpuUsage() };
    })().finally(() => (sampling = undefined));
  }, EVERY_MS);
  let stopped: Promise<string[]> | undefined;
  return {
    stop() {
      stopped ??= (async () => {
        clearInterval(timer);
        await sampling;
        await pg.end();
        return lines;
      })();
      return stopped;
    },
  };
}
