import type { AppProcess } from '../app-process';
import type { Scenario } from '../scenario';
import { Waves } from '../load';
import { pick, sleep, waitFor } from '../util';

/**
 * kill -9 of random workers, round after round, while runs execute; each victim is restarted
 * after a short while (a crash-looping pod). Some rounds kill two workers at once. Victims are
 * picked among the workers whose commands are alive (the commands' own records and the OS), and
 * the scenario fails unless most kills hit a worker that held at least one.
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
    let busyKills = 0;
    let commandsKilled = 0;
    const violations: string[] = [];
    const restarts: Promise<void>[] = [];
    for (let round = 1; round <= rounds; round++) {
      waves.launch();
      // Into the wave while its commands run (0.3-2 s each): on a quiet box a wait of 1.5-3 s let
      // a whole wave finish first, and three of six kills hit idle workers (CI seed 504600998).
      await sleep(300 + rand() * 1200);
      // A worker with a live command, if one turns up within a few seconds (one more wave if this
      // one ended unseen); else any live worker: restarts take long on a loaded box, and a round
      // never passes without a kill.
      const busyWithin = (ms: number) =>
        waitFor(() => c.busyWorkers().length > 0, ms, 'a worker holding a command').then(
          () => true,
          () => false,
        );
      if (!(await busyWithin(5000))) {
        waves.launch();
        await busyWithin(5000);
      }
      const ready = await waitFor(() => c.liveWorkers().length > 0, 60_000, 'a live worker').then(
        () => true,
        () => false,
      );
      if (!ready) {
        violations.push(`round ${round}: no worker was up to kill for 60 s`);
        continue;
      }
      const busy = c.busyWorkers().map((b) => b.worker);
      const live = c.liveWorkers();
      const victims = new Set<AppProcess>([pick(rand, busy.length ? busy : live)]);
      if (!quick && round % 5 === 0 && live.length > 1) victims.add(pick(rand, live));
      for (const w of victims) {
        const pid = w.pid;
        const held = await c.kill(w);
        kills++;
        if (held > 0) busyKills++;
        commandsKilled += held;
        log(`round ${round}: kill -9 ${w.label} (pid ${pid}, ${held} command(s) alive)`);
        restarts.push(sleep(500 + rand() * 1000).then(() => c.restart(w)));
      }
    }
    await Promise.all(restarts);
    const load = await waves.settle();
    violations.push(...load.badStorms.map((id) => `dispatch: run ${id} not accepted exactly once`));
    // The faults must have landed: most kills on a worker that was running something.
    if (busyKills * 2 <= kills) violations.push(`only ${busyKills} of ${kills} kills hit a worker with a live command`);
    return {
      counts: { kills, busyKills, commandsKilled, duplicatesAnswered: load.answers.get('409') },
      violations,
    };
  },
};
