import type { Scenario } from '../scenario';
import { planeStorm, Waves } from '../load';
import { sleep } from '../util';

/**
 * The stores fail under load: every Redis key of the app (queues, jobs, locks, fencing counters)
 * is deleted, as a Redis restart without persistence would; the app's Postgres connections are
 * terminated (pg_terminate_backend). Postgres is the truth: the reconciler rebuilds the queue.
 */
export const stores: Scenario = {
  name: 'stores',
  summary: 'Redis keys wiped and Postgres connections terminated mid-load',
  cluster: () => ({ workers: 2 }),
  async run(c, { quick, rand, log }) {
    const waves = new Waves(c, rand, {
      runs: 10,
      copies: 3,
      sleepMin: 0.3,
      sleepMax: 1.5,
      transientShare: 0.1,
      failShare: 0.05,
      maxConcurrentRuns: 12,
    });
    waves.launch();
    // Plane deliveries keep coming while the stores fail: intake must neither lose nor double them.
    const plane = sleep(1500).then(() =>
      planeStorm(c, rand, { items: quick ? 6 : 20, copies: 4, fields: 2, botItems: 0 }),
    );
    const faults = quick
      ? ['redis', 'pg', 'pg', 'redis']
      : ['redis', 'pg', 'pg', 'redis', 'pg', 'redis', 'pg', 'pg', 'redis', 'pg'];
    let wipes = 0;
    let keysDeleted = 0;
    let pgTerminations = 0;
    let connectionsKilled = 0;
    const violations: string[] = [];
    for (const [i, fault] of faults.entries()) {
      waves.launch();
      await sleep(2000 + rand() * 1500);
      if (fault === 'redis') {
        const n = await c.wipeRedis();
        wipes++;
        keysDeleted += n;
        log(`fault ${i + 1}: deleted ${n} Redis keys under ${c.prefix}:*`);
        if (n === 0) violations.push(`fault ${i + 1}: the Redis wipe found no key to delete`);
      } else {
        const n = await c.terminatePg();
        pgTerminations++;
        connectionsKilled += n;
        log(`fault ${i + 1}: terminated ${n} app connections to ${c.dbName}`);
        if (n === 0) violations.push(`fault ${i + 1}: no app connection to terminate`);
      }
    }
    const [runs, deliveries] = await Promise.all([waves.settle(), plane]);
    log(`dispatch answers ${runs.answers}; plane answers ${deliveries.answers}`);
    // Plane does not retry a 5xx: the event would be lost. The contract allows none (a spool takes
    // deliveries while Postgres is unreachable).
    if (deliveries.answers.get('5xx') > 0)
      violations.push(`plane: ${deliveries.answers.get('5xx')} deliveries answered 5xx (Plane would drop them)`);
    return {
      workItems: deliveries.workItems,
      violations: [...violations, ...runs.badStorms.map((id) => `dispatch: run ${id} not accepted exactly once`)],
      counts: {
        wipes,
        keysDeleted,
        pgTerminations,
        connectionsKilled,
        kills: 0,
        duplicatesAnswered: runs.answers.get('409') + deliveries.answers.get('duplicate'),
        dispatch5xx: [...runs.answers.toString().matchAll(/\b5\d\d=(\d+)/g)].reduce((s, m) => s + Number(m[1]), 0),
        delivery5xx: deliveries.answers.get('5xx'),
      },
    };
  },
};
