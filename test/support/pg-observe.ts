import type { PoolClient } from 'pg';
import type { Histogram } from 'prom-client';
import { db, waitFor } from './app';

/** Backends of the app (application_name onceflow) in this test database waiting for a row lock. */
export async function appBackendsWaitingForALock(): Promise<number[]> {
  const { rows } = await db().query(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'onceflow' AND wait_event_type = 'Lock'`,
  );
  return rows.map((r) => r.pid as number);
}

/**
 * Batches observed by a batch-size histogram since the previous call: how many were sent and how
 * many requests they carried (its _count and _sum).
 */
export function batchSizeDeltas(
  histogram: () => Histogram,
  name: string,
): () => Promise<{ statements: number; rows: number }> {
  let last = { statements: 0, rows: 0 };
  return async () => {
    const { values } = await histogram().get();
    const now = {
      statements: values.find((v) => v.metricName === `${name}_count`)!.value,
      rows: values.find((v) => v.metricName === `${name}_sum`)!.value,
    };
    const delta = { statements: now.statements - last.statements, rows: now.rows - last.rows };
    last = now;
    return delta;
  };
}

/**
 * Holds the row locks of `runIds` in a transaction of its own, starts `work` (whose statement then
 * waits for them inside its round trip), waits until that one app backend is waiting, calls
 * `meanwhile` with the holding transaction (still open) and the waiting backend's pid, commits,
 * and answers what `work` answered. The fault tests of the batch paths cut that backend's
 * connection, or change the rows, while it waits.
 */
export async function whileRunsLocked<T>(
  runIds: readonly string[],
  work: () => Promise<T>,
  meanwhile: (tx: PoolClient, waitingPid: number) => Promise<void>,
): Promise<T> {
  const tx = await db().connect();
  try {
    await tx.query('BEGIN');
    await tx.query('SELECT id FROM runs WHERE id = ANY($1::uuid[]) FOR UPDATE', [runIds]);
    const pending = work();
    // Answered (or rejected) before the commit below is awaited: observed later, not unhandled.
    pending.catch(() => undefined);
    await waitFor(
      async () => (await appBackendsWaitingForALock()).length === 1,
      5000,
      'the statement to wait for the row locks',
    );
    await meanwhile(tx, (await appBackendsWaitingForALock())[0]);
    await tx.query('COMMIT');
    return await pending;
  } finally {
    tx.release();
  }
}
