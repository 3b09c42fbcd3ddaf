import type { Scenario } from '../scenario';
import { Waves } from '../load';
import { pick, sleep, waitFor } from '../util';

/**
 * A worker whose commands are running is frozen (SIGSTOP: a GC pause, a VM stall) for three lock
 * TTLs — long enough for its lock and lease to lapse and the run to be taken over — then resumed.
 * Its commands must die before its lock lapses (the watchdog's lease); on waking it must write
 * nothing. Every round must find such a worker: a round without a victim is a violation.
 */
export const freeze: Scenario = {
  name: 'freeze',
  summary: 'a worker frozen (SIGSTOP) past its lock TTL, then resumed (SIGCONT)',
  cluster: () => ({ workers: 3 }),
  async run(c, { quick, rand, log }) {
    const waves = new Waves(c, rand, {
      runs: 10,
      copies: 2,
      sleepMin: 1.0,
      sleepMax: 3.5,
      transientShare: 0.1,
      maxConcurrentRuns: 12,
    });
    const rounds = quick ? 2 : 5;
    const freezeMs = 3 * c.lockTtlMs;
    const violations: string[] = [];
    let freezes = 0;
    let commandsFrozen = 0;
    for (let round = 1; round <= rounds; round++) {
      waves.launch();
      let held = 0;
      const landed = await waitFor(
        () => {
          const busy = c.busyWorkers();
          if (busy.length === 0) return false;
          const victim = pick(rand, busy).worker;
          held = c.freeze(victim);
          if (held > 0) {
            log(
              `round ${round}: SIGSTOP ${victim.label} (pid ${victim.pid}, ${held} command(s) alive) for ${freezeMs} ms`,
            );
            return true;
          }
          c.thaw(victim); // its last command ended in between: try again
          return false;
        },
        30_000,
        'a worker with a live command',
      ).then(
        () => true,
        () => false,
      );
      if (!landed) {
        violations.push(`freeze round ${round}: no worker held a live command within 30 s; nothing was frozen`);
        continue;
      }
      const victim = c.workers.find((w) => w.frozen)!;
      freezes++;
      commandsFrozen += held;
      await sleep(freezeMs);
      c.thaw(victim);
      log(`round ${round}: SIGCONT ${victim.label}`);
      await sleep(1000 + rand() * 1000);
    }
    const load = await waves.settle();
    violations.push(...load.badStorms.map((id) => `dispatch: run ${id} not accepted exactly once`));
    return { counts: { freezes, commandsFrozen, kills: 0, duplicatesAnswered: load.answers.get('409') }, violations };
  },
};
