import type { Scenario } from '../scenario';
import { Waves } from '../load';
import { sleep, waitFor } from '../util';

/**
 * A worker that holds a running run is frozen (SIGSTOP: a GC pause, a VM stall) for three lock
 * TTLs — long enough for its lock and lease to lapse and the run to be taken over — then resumed.
 * On waking it must notice its lease is gone, kill its commands and write nothing.
 */
export const freeze: Scenario = {
  name: 'freeze',
  summary: 'a worker frozen (SIGSTOP) past its lock TTL, then resumed (SIGCONT)',
  cluster: () => ({ workers: 3 }),
  async run(c, { quick, rand, log }) {
    const waves = new Waves(c, rand, { runs: 10, copies: 2, sleepMin: 1.0, sleepMax: 3.5, transientShare: 0.1, maxConcurrentRuns: 12 });
    const rounds = quick ? 2 : 5;
    const freezeMs = 3 * c.lockTtlMs;
    let freezes = 0;
    for (let round = 1; round <= rounds; round++) {
      waves.launch();
      let runId = '';
      await waitFor(
        async () => {
          const { rows } = await c.pg.query(`SELECT id FROM runs WHERE status = 'RUNNING' ORDER BY random() LIMIT 1`);
          runId = rows[0]?.id ?? '';
          return runId !== '' && (await c.holderOf(runId)) !== undefined;
        },
        30_000,
        'a running run',
      ).catch(() => undefined);
      const victim = runId ? await c.holderOf(runId) : undefined;
      if (!victim) break;
      const { rows } = await c.pg.query(`SELECT count(*)::int AS n FROM runs WHERE status = 'RUNNING' AND lease_owner LIKE $1`, [
        `%:${victim.pid}:%`,
      ]);
      c.freeze(victim);
      freezes++;
      log(`round ${round}: SIGSTOP ${victim.label} (pid ${victim.pid}, holding ${rows[0].n} run(s)) for ${freezeMs} ms`);
      await sleep(freezeMs);
      c.thaw(victim);
      log(`round ${round}: SIGCONT ${victim.label}`);
      await sleep(1000 + rand() * 1000);
    }
    const load = await waves.settle();
    return {
      counts: { freezes, kills: 0, duplicatesAnswered: load.answers.get('409') },
      violations: load.badStorms.map((id) => `dispatch: run ${id} not accepted exactly once`),
    };
  },
};
