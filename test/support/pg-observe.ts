import type { Histogram } from 'prom-client';
import { db } from './app';

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
