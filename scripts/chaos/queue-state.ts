import type { Cluster } from './cluster';

/**
 * Evidence for a notification that was not delivered as it should: its outbox row, and for each
 * job id it may have had (`notification.<id>.a<n>`) the Bull hash and the lists/sets that hold it.
 * A job hash in no list is what Bull calls "stuck": it silently swallows any new add of that id.
 */
export async function notificationState(c: Cluster, runId: string): Promise<string> {
  const { rows } = await c.pg.query(
    `SELECT id, status, attempts, claimed_until, next_attempt_at, last_error, created_at, updated_at FROM notification_logs WHERE run_id = $1`,
    [runId],
  );
  const out: string[] = [];
  const base = `${c.prefix}:bull:notifications`;
  for (const row of rows) {
    out.push(`    row ${JSON.stringify(row)}`);
    for (let a = 0; a <= Number(row.attempts); a++) {
      const jobId = `notification.${row.id}.a${a}`;
      const hash = await c.redis.hgetall(`${base}:${jobId}`);
      const where: string[] = [];
      for (const list of ['wait', 'active', 'paused'])
        if ((await c.redis.lpos(`${base}:${list}`, jobId)) !== null) where.push(list);
      for (const set of ['delayed', 'completed', 'failed'])
        if ((await c.redis.zscore(`${base}:${set}`, jobId)) !== null) where.push(set);
      const lock = await c.redis.pttl(`${base}:${jobId}:lock`);
      out.push(
        `    job ${jobId}: in [${where.join(', ') || (Object.keys(hash).length ? 'no list: stuck' : 'absent')}] lock ttl ${lock} hash ${JSON.stringify(hash).slice(0, 400)}`,
      );
    }
  }
  return out.join('\n') || '    no outbox row';
}
