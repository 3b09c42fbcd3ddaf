import type { Scenario } from '../scenario';
import { dispatchStorm, planeStorm } from '../load';

/**
 * Duplicate producers, no other fault: every run dispatched 10 times at once, and a Plane storm —
 * each `created` body delivered many times with a fresh X-Plane-Delivery, per-field `updated`
 * events (each twice), and events by our own bot — all shuffled and concurrent.
 */
export const storm: Scenario = {
  name: 'storm',
  summary: 'dispatch storm (10x per run) + Plane duplicate-delivery storm',
  cluster: () => ({ workers: 2 }),
  async run(c, { quick, rand, log }) {
    const planeSpec = {
      items: quick ? 12 : 40,
      copies: quick ? 8 : 10,
      fields: quick ? 3 : 5,
      botItems: quick ? 3 : 6,
    };
    const [runs, plane] = await Promise.all([
      dispatchStorm(c, rand, {
        runs: quick ? 40 : 150,
        copies: 10,
        sleepMin: 0.1,
        sleepMax: 0.4,
        transientShare: 0.1,
        failShare: 0.05,
        maxConcurrentRuns: 16,
      }),
      planeStorm(c, rand, planeSpec),
    ]);
    log(`dispatch answers ${runs.answers}; plane answers ${plane.answers}`);
    const violations = runs.badStorms.map((id) => `dispatch storm: run ${id} was not accepted exactly once`);
    // Each distinct body is stored once; every other copy is answered as a duplicate.
    const distinct = planeSpec.items * (1 + planeSpec.fields) + planeSpec.botItems * 2;
    const stored = (await c.pg.query(`SELECT count(*)::int AS n FROM webhook_deliveries`)).rows[0].n as number;
    if (stored !== distinct)
      violations.push(`plane storm: ${stored} deliveries stored for ${distinct} distinct bodies`);
    if (plane.answers.get('5xx') > 0)
      violations.push(`plane storm: ${plane.answers.get('5xx')} deliveries answered 5xx (Plane would drop them)`);
    return {
      workItems: plane.workItems,
      botItems: plane.botItems,
      violations,
      counts: {
        dispatches: runs.runIds.length * 10,
        dispatch202: runs.answers.get('202'),
        dispatch409: runs.answers.get('409'),
        deliveries: plane.sent,
        deliveriesAccepted: plane.answers.get('accepted'),
        deliveriesDuplicate: plane.answers.get('duplicate'),
        deliveriesIgnored: plane.answers.get('ignored'),
        deliveriesStored: stored,
        duplicatesAnswered: runs.answers.get('409') + plane.answers.get('duplicate'),
      },
    };
  },
};
