import type { Pool } from 'pg';
import type { LlmStub } from '../test/support/llm-stub';
import type { AppProcess } from './chaos/app-process';
import type { ApiClient } from './chaos/client';
import { waitFor } from './chaos/util';

/** The requirement prefix that makes the demo's command run the bundled sample orchestrator. */
export const STEPS_DEMO_TAG = '[steps demo]';

interface StepView {
  name: string;
  status: string;
  attempt: number;
}

/**
 * The steps part of `npm run demo`: one run of the bundled sample orchestrator (four steps, one
 * LLM call through the worker's caching proxy to a local stand-in provider); the worker holding
 * it is killed with -9 while the third step runs. The next attempt, on the other worker, replays
 * the two finished steps — the LLM is not asked again — and runs the rest.
 */
export async function stepsDemo(
  client: ApiClient,
  db: Pool,
  workers: AppProcess[],
  llm: LlmStub,
  say: (line: string) => void,
): Promise<void> {
  say('');
  say(
    'steps: one run of the sample orchestrator (prepare → plan [asks the LLM] → write-result → report), each step ~1.5 s;',
  );
  say('       its worker is killed with -9 during write-result …');
  const project = await client.createProject(1);
  const runId = await client.createRun(
    project,
    `${STEPS_DEMO_TAG} Add a /health endpoint that reports the database state`,
    true,
  );
  const steps = async (): Promise<StepView[]> =>
    (await client.call('GET', `/api/runs/${runId}/steps`)).body?.items ?? [];
  await waitFor(
    async () => (await steps()).some((s) => s.name === 'write-result' && s.status === 'STARTED'),
    60_000,
    'step write-result to start',
    100,
  );
  const { rows } = await db.query(`SELECT lease_owner FROM runs WHERE id = $1`, [runId]);
  const pid = Number(String(rows[0]?.lease_owner ?? '').split(':')[1]);
  const victim = workers.find((w) => w.pid === pid);
  if (!victim) throw new Error(`no demo worker holds run ${runId} (lease owner ${rows[0]?.lease_owner})`);
  const callsBefore = llm.count();
  await victim.kill();
  say(
    `       kill -9 ${victim.label} (pid ${pid}) at step write-result; the other worker takes the run over after the lock TTL …`,
  );
  await waitFor(
    async () => ['SUCCESS', 'FAILED'].includes((await client.call('GET', `/api/runs/${runId}`)).body?.status),
    90_000,
    'the steps run to finish',
    200,
  );
  const run = (await client.call('GET', `/api/runs/${runId}`)).body;
  const events = await client.events(runId);
  const finals = events.filter((e) => e.reason?.includes('steps:'));
  say('');
  say(`  run ${runId}: ${run.status} after ${run.attempts} attempts`);
  for (const s of await steps()) {
    const note =
      s.attempt === 1 ? 'ran in attempt 1, replayed from the journal afterwards' : `ran in attempt ${s.attempt}`;
    say(`    ${s.name.padEnd(13)} ${s.status.padEnd(5)} ${note}`);
  }
  say(`  LLM calls that reached the provider: ${llm.count()} (${llm.count() - callsBefore} after the kill)`);
  for (const e of finals) say(`  attempt ${e.attempt} (${e.to}): ${e.reason}`);
  say(`  the journal: GET /api/runs/${runId}/steps`);
}
