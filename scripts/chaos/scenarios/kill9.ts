import type { AppProcess } from '../app-process';
import type { Scenario } from '../scenario';
import { Waves } from '../load';
import { pick, sleep } from '../util';

/**
 * kill -9 of random workers, round after round, while runs execute; each victim is restarted
 * after a short while (a crash-looping pod). Some rounds kill two workers at once.
 */
export const kill9: Scenario = {
  name: 'kill9',
  summary: 'kill -9 of random workers, repeatedly, under load (restarted)',
  cluster: () => ({ workers: 3 }),
  async run(c, { quick, rand, log }) {
    // A wave of runs before every round, so that every kill lands on busy workers.
    const waves = new Waves(c, rand, {
      runs: 8,
      copies: 3,
      sleepMin: 0.3,
      sleepMax: 2.0,
      transientShare: 0.1,
      failShare: 0.05,
      maxConcurrentRuns: 12,
    });
    const rounds = quick ? 6 : 20;
    let kills = 0;
    const restarts: Promise<void>[] = [];
    for (let round = 1; round <= rounds; round++) {
      waves.launch();
      await sleep(1500 + rand() * 1500);
      const live = c.liveWorkers();
      if (live.length === 0) continue;
      const victims = new Set<AppProcess>([pick(rand, live)]);
      if (!quick && round % 5 === 0 && live.length > 1) victims.add(pick(rand, live));
      for (const w of victims) {
        const { rows } = await c.pg.query(`SELECT count(*)::int AS n FROM runs WHERE status = 'RUNNING' AND lease_owner LIKE $1`, [`%:${w.pid}:%`]);
        await c.kill(w);
        kills++;
        log(`round ${round}: kill -9 ${w.label} (pid ${w.pid}, holding ${rows[0].n} run(s))`);
        restarts.push(sleep(500 + rand() * 1000).then(() => c.restart(w)));
      }
    }
    await Promise.all(restarts);
    const load = await waves.settle();
    return {
      counts: { kills, duplicatesAnswered: load.answers.get('409') },
      violations: load.badStorms.map((id) => `dispatch: run ${id} not accepted exactly once`),
    };
  },
};
