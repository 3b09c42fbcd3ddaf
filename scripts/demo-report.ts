import type { Pool } from 'pg';
import type { SlackStub } from '../test/support/slack-stub';
import type { AppProcess } from './chaos/app-process';
import type { PlaneLoadResult, RunLoadResult } from './chaos/load';
import type { Witness } from './chaos/witness';

export interface Figures {
  rows: Array<[string, string | number, string]>;
  guards: Record<string, number>;
}

/** Sums `onceflow_duplicates_suppressed_total{guard=…}` over every process (each counts its own). */
async function guardCounts(processes: AppProcess[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const p of processes) {
    const text = await fetch(`${p.url}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    for (const m of text.matchAll(/^onceflow_duplicates_suppressed_total\{guard="([^"]+)"\} (\d+)/gm))
      out[m[1]] = (out[m[1]] ?? 0) + Number(m[2]);
  }
  return out;
}

/** The demo's figures: the storms' answers, the stored rows, and what really ran (the orchestrator's file). */
export async function collectFigures(
  db: Pool,
  processes: AppProcess[],
  runs: RunLoadResult,
  plane: PlaneLoadResult,
  witness: Witness,
  slack: SlackStub,
): Promise<Figures> {
  const one = async (sql: string) => (await db.query(sql)).rows[0] as Record<string, number>;
  const deliveries = await one(
    `SELECT count(*)::int AS stored, coalesce(sum(duplicate_count), 0)::int AS dups,
            count(*) FILTER (WHERE status = 'ignored')::int AS ignored FROM webhook_deliveries`,
  );
  const tasks = await one(`SELECT count(*)::int AS n FROM tasks WHERE external_provider = 'plane'`);
  const r = await one(
    `SELECT count(*)::int AS total, count(*) FILTER (WHERE kind = 'authoring')::int AS authoring,
            count(*) FILTER (WHERE status = 'SUCCESS')::int AS success, count(*) FILTER (WHERE status = 'FAILED')::int AS failed FROM runs`,
  );
  const sent = await one(`SELECT count(*) FILTER (WHERE status = 'SENT')::int AS n FROM notification_logs`);
  const perRun = new Map<string, number>();
  for (const e of witness.executions)
    if (e.end?.kind === 'done') perRun.set(e.start.runId, (perRun.get(e.start.runId) ?? 0) + 1);
  const twice = [...perRun.values()].filter((n) => n > 1).length;
  const dispatches = runs.runIds.length * 10;
  return {
    rows: [
      [
        'dispatch requests',
        dispatches,
        `${runs.answers.get('202')} × 202 accepted, ${runs.answers.get('409')} × 409 duplicate`,
      ],
      [
        'Plane deliveries received',
        plane.sent,
        `${plane.workItems.length} work items + ${plane.botItems.length} by our bot, each sent many times`,
      ],
      ['  accepted (new)', plane.answers.get('accepted'), 'a new body: stored and processed'],
      [
        '  duplicates',
        plane.answers.get('duplicate'),
        `same bytes again (fresh X-Plane-Delivery), or the item already has its task`,
      ],
      ['  ignored', plane.answers.get('ignored'), 'events by PLANE_BOT_ACTOR_IDS (our own bot)'],
      [
        'deliveries stored',
        deliveries.stored,
        `${deliveries.dups} duplicate hits counted on them, ${deliveries.ignored} ignored`,
      ],
      ['tasks', tasks.n, `one per work item (${plane.workItems.length} items)`],
      ['runs', r.total, `${r.total - r.authoring} from the API + ${r.authoring} authoring runs from Plane`],
      [
        'runs executed',
        witness.executions.length,
        `${witness.count('done')} completed, ${twice} more than once (the orchestrator's own log)`,
      ],
      ['run outcomes', `${r.success} / ${r.failed}`, 'SUCCESS / FAILED'],
      ['notifications', slack.delivered(), `${sent.n} SENT rows; messages the local Slack stub answered 200`],
    ],
    guards: await guardCounts(processes),
  };
}

export function printTable(f: Figures): void {
  const w0 = Math.max(...f.rows.map((r) => r[0].length));
  const w1 = Math.max(...f.rows.map((r) => String(r[1]).length));
  process.stdout.write('\n');
  for (const [label, value, note] of f.rows)
    process.stdout.write(`  ${label.padEnd(w0)}  ${String(value).padStart(w1)}   ${note}\n`);
  const guards = Object.entries(f.guards)
    .filter(([, n]) => n > 0)
    .map(([g, n]) => `${g}=${n}`)
    .join(', ');
  process.stdout.write(`\n  duplicates suppressed, by guard (from /metrics): ${guards || 'none'}\n`);
}
