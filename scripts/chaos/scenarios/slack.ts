import type { StubReply } from '../../../test/support/slack-stub';
import type { Scenario } from '../scenario';
import { pick, waitFor } from '../util';

const ERR = (status: number): StubReply => ({ status, body: 'stub_error' });
const LIMIT: StubReply = { status: 429, headers: { 'Retry-After': '1' }, body: 'rate_limited' };

/** Scripted Slack misbehaviour per message: 5xx, 429 + Retry-After, or both, before a 200. */
const PLANS: StubReply[][] = [
  [],
  [ERR(500)],
  [ERR(500), ERR(503)],
  [LIMIT],
  [ERR(500), LIMIT],
  [LIMIT, LIMIT],
  [ERR(502), ERR(500), ERR(500)],
];

/** Slack answers 500s and 429s with Retry-After; every finished run must still be announced once. */
export const slack: Scenario = {
  name: 'slack',
  summary: 'Slack failing (5xx) and rate-limiting (429 + Retry-After)',
  cluster: () => ({ workers: 2 }),
  async run(c, { quick, rand }) {
    const project = await c.client.createProject(16);
    const n = quick ? 30 : 100;
    const runIds: string[] = [];
    const planned = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const fail = rand() < 0.2 ? ' fail' : '';
      const id = await c.client.createRun(
        project,
        `slack run ${i} sleep=0.${1 + Math.floor(rand() * 4)}${fail}`,
        false,
      );
      const plan = pick(rand, PLANS);
      if (plan.length) c.slack.plan(id, ...plan);
      planned.set(id, plan.length);
      runIds.push(id);
    }
    const storm = await dispatchStormOf(c, runIds);
    // The faults must land: every scripted error answered before the run's message got its 200.
    await waitFor(() => runIds.every((id) => c.slack.delivered(id) > 0), 60_000, 'every run announced').catch(
      () => undefined,
    );
    const violations: string[] = [];
    for (const [id, n] of planned) {
      const served = c.slack.for(id).filter((r) => r.state === 'answered' && r.status !== 200).length;
      if (served < n) violations.push(`run ${id}: ${served} of its ${n} scripted Slack errors were served`);
    }
    const errorsPlanned = [...planned.values()].reduce((a, b) => a + b, 0);
    return { counts: { kills: 0, duplicatesAnswered: storm, errorsPlanned }, violations };
  },
};

/** Dispatches each run twice at once; returns how many were refused as duplicates. */
async function dispatchStormOf(c: Parameters<Scenario['run']>[0], runIds: string[]): Promise<number> {
  const answers = await Promise.all(runIds.flatMap((id) => [c.client.dispatch(id), c.client.dispatch(id)]));
  return answers.filter((a) => a.status === 409).length;
}
