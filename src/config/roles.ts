/** The roles one onceflow process can take (APP_ROLE), and what each one runs. */
export type AppRole = 'api' | 'worker' | 'scheduler' | 'all';

/**
 * A worker's pool follows its concurrency, as it always has: its runs' claims, finalizes, steps
 * and LLM cache calls may all want a connection at once. An API process's requests hold one for a
 * statement or a short transaction; more connections than a few per core only make Postgres's
 * backends queue on each other's WAL flushes and locks on the same cores: with 69 (the pool of
 * WORKER_CONCURRENCY=32) a new Plane item cost Postgres 2.3–2.6 times the CPU it costs with 10
 * (docs/benchmarks.md, "The API's Postgres pool").
 */
export function defaultPoolSize(role: AppRole, workerConcurrency: number): number {
  return roleRunsWorkers(role) ? Math.max(10, workerConcurrency * 2 + 5) : API_POOL_SIZE;
}

/** The API's (and the scheduler's) default pool: of 4–69 measured for the intake on 2 cores, 6–16 did best. */
export const API_POOL_SIZE = 10;

export function roleServesApi(role: AppRole): boolean {
  return role === 'api' || role === 'all';
}
export function roleRunsWorkers(role: AppRole): boolean {
  return role === 'worker' || role === 'all';
}
export function roleRunsScheduler(role: AppRole): boolean {
  return role === 'scheduler' || role === 'all';
}
