import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster } from './cluster';
import { sleep, waitFor } from './util';
import { checkExecutions, orphanLives } from './execution-check';
import { checkSlack, runOfMessage } from './slack-check';
import { notificationState } from './queue-state';

const TERMINAL = ['SUCCESS', 'FAILED', 'CANCELLED'];

interface RunRow {
  id: string;
  status: string;
  attempts: number;
  fencing_token: string;
  requirement: string;
}

export interface Verdict {
  violations: string[];
  /** Re-executions explained by a crash/freeze between a command's exit and its commit. */
  windows: string[];
  warnings: string[];
  counts: Record<string, number>;
}

export interface CheckInput {
  /** Plane work items sent by a human (each must end with exactly one task and one authoring run). */
  workItems?: string[];
  /** Work items whose every event came from our bot (must have no task at all). */
  botItems?: string[];
  /** How long runs may take to settle once the faults stopped. */
  settleMs: number;
  /** Count re-executions inside the at-least-once window as violations too. */
  strict?: boolean;
}

/**
 * Checks the invariants from outside the app: the orchestrator's own file (through the witness),
 * the Slack stub's count of answered messages, and direct SQL reads of final states. Every
 * violation is written with its evidence (execution lines, run events) to `evidence.log`.
 */
export async function checkInvariants(c: Cluster, input: CheckInput): Promise<Verdict> {
  const v: Verdict = { violations: [], windows: [], warnings: [], counts: {} };
  const evidence = join(c.dir, 'evidence.log');
  const record = async (msg: string, runId?: string) => {
    const events = runId ? await c.client.events(runId) : [];
    const execs = runId ? c.witness.executions.filter((e) => e.start.runId === runId) : [];
    const parts = [
      msg,
      ...execs.map((e) => `  execution ${JSON.stringify({ ...e, workerLabel: c.workerPids().get(e.worker ?? -1) })}`),
      ...events.map((e) => `  event (the app's own account) ${JSON.stringify(e)}`),
    ];
    appendFileSync(evidence, `${parts.join('\n')}\n`);
  };
  const violate = async (msg: string, runId?: string) => {
    v.violations.push(msg);
    await record(msg, runId);
  };

  // 1. Every run terminal, and after one more reaper interval nothing is RUNNING.
  const pending = async () =>
    (await c.pg.query(`SELECT count(*)::int AS n FROM runs WHERE status <> ALL($1)`, [TERMINAL])).rows[0].n as number;
  await waitFor(async () => (await pending()) === 0, input.settleMs, 'every run to be terminal').catch(() => undefined);
  await sleep(c.reconcileIntervalMs + c.lockTtlMs);
  const runs = (await c.pg.query<RunRow>(`SELECT id, status, attempts, fencing_token, requirement FROM runs`)).rows;
  for (const r of runs.filter((x) => !TERMINAL.includes(x.status)))
    await violate(`run ${r.id} left ${r.status} (attempts ${r.attempts})`, r.id);

  // 2. Notifications settle (SENT/FAILED), then a short grace for a stray second post.
  await waitFor(
    async () =>
      (await c.pg.query(`SELECT count(*)::int AS n FROM notification_logs WHERE status = 'PENDING'`)).rows[0].n === 0,
    input.settleMs,
    'notifications to settle',
  ).catch(() => undefined);
  await sleep(500);
  c.witness.poll();

  // The stalls the probe saw go to faults.log beside the injected faults: they explain repeats too.
  for (const stall of c.stalls()) appendFileSync(join(c.dir, 'faults.log'), `${JSON.stringify(stall)}\n`);

  // 3. Executions seen from outside, per run: the commands' own lines, the OS, the faults we injected.
  const maxAttempts = Number(c.env.RUN_MAX_ATTEMPTS);
  const findings = checkExecutions({
    // What a run was built to do comes from what we sent; only Plane-made runs fall back to the stored text.
    runs: runs.map((r) => ({ ...r, requirement: c.client.requirements.get(r.id) ?? r.requirement })),
    executions: c.witness.executions,
    faults: c.allFaults(),
    workers: c.workerPids(),
    lockTtlMs: c.lockTtlMs,
    maxAttempts,
  });
  for (const f of findings) {
    if (f.kind === 'violation' || input.strict) await violate(f.message, f.runId);
    else {
      v.windows.push(f.message);
      v.counts.reexecuted = (v.counts.reexecuted ?? 0) + 1;
      await record(`at-least-once window: ${f.message}`, f.runId);
    }
  }
  // How long a killed worker's commands lived on (the watchdog's reaction), seen from outside.
  const lives = orphanLives(c.witness.executions, c.faults);
  if (lives.length) v.counts.orphanLifeMaxMs = Math.max(...lives);
  for (const e of c.witness.alive())
    await violate(
      `command of run ${e.start.runId} (pid ${e.start.pid}, attempt ${e.start.attempt}) still alive at the end`,
      e.start.runId,
    );

  // 4. Exactly one Slack message per finished run, none for the others.
  for (const f of checkSlack({
    runs,
    requests: c.slack.requests,
    faults: c.allFaults(),
    lagBefore: (t) => c.lag.before(t),
  })) {
    if (f.kind === 'violation' || input.strict) await violate(f.message, f.runId);
    else {
      v.windows.push(f.message);
      v.counts.slackRepeats = (v.counts.slackRepeats ?? 0) + 1;
      await record(`at-least-once window (Slack): ${f.message}`, f.runId);
    }
    const posts = c.slack
      .for(f.runId)
      .map(
        (r) =>
          `    POST from pid ${r.poster ?? '?'} (port ${r.remotePort}) received ${r.receivedAt} ${r.state} ${r.status ?? ''} at ${r.answeredAt ?? '-'}`,
      );
    await record(
      `  Slack stub and outbox for run ${f.runId}:\n${posts.join('\n')}\n${await notificationState(c, f.runId)}`,
    );
  }
  const notif = (await c.pg.query(`SELECT status, count(*)::int AS n FROM notification_logs GROUP BY status`))
    .rows as Array<{
    status: string;
    n: number;
  }>;
  for (const row of notif) if (row.status !== 'SENT') v.warnings.push(`${row.n} notification row(s) ${row.status}`);

  // 5. One task (and one authoring run) per work item; none for our bot's own events.
  if (input.workItems?.length || input.botItems?.length) {
    const { rows } = await c.pg.query(
      `SELECT t.external_id, count(DISTINCT t.id)::int AS tasks, count(r.id)::int AS runs
         FROM tasks t LEFT JOIN runs r ON r.task_id = t.id AND r.kind = 'authoring'
        WHERE t.external_provider = 'plane' GROUP BY t.external_id`,
    );
    const byItem = new Map(rows.map((x: { external_id: string; tasks: number; runs: number }) => [x.external_id, x]));
    for (const id of input.workItems ?? []) {
      const x = byItem.get(id);
      if (!x || x.tasks !== 1 || x.runs !== 1)
        await violate(`work item ${id}: ${x?.tasks ?? 0} task(s), ${x?.runs ?? 0} authoring run(s), expected 1 and 1`);
    }
    for (const id of input.botItems ?? [])
      if (byItem.has(id)) await violate(`work item ${id}: a task was created from our bot's own event`);
    v.counts.tasks = rows.reduce((s: number, x: { tasks: number }) => s + x.tasks, 0);
  }

  const status = (s: string) => runs.filter((r) => r.status === s).length;
  Object.assign(v.counts, {
    runs: runs.length,
    success: status('SUCCESS'),
    failed: status('FAILED'),
    executions: c.witness.executions.length,
    done: c.witness.count('done'),
    killedAttempts: c.witness.executions.filter((e) => !e.end).length,
    orphanStarts: c.witness.executions.filter((e) => e.worker === 0).length,
    reexecuted: v.counts.reexecuted ?? 0,
    slackRepeats: v.counts.slackRepeats ?? 0,
    messages: c.slack.requests.filter((r) => r.state === 'answered' && r.status === 200 && runOfMessage(r.text) !== '?')
      .length,
    slackRequests: c.slack.requests.length,
    slack5xx: c.slack.requests.filter((r) => r.state === 'answered' && (r.status ?? 0) >= 500).length,
    slack429: c.slack.requests.filter((r) => r.state === 'answered' && r.status === 429).length,
    postersUnknown: c.slack.requests.filter((r) => r.poster === undefined).length,
    // Stalls the probe saw outside our own freezes: the box's load, not a fault we injected.
    stalls: c.stalls().length,
    stallMaxMs: Math.max(0, ...c.stalls().map((s) => (s.untilMs ?? s.atMs) - s.atMs)),
    runnerLagMaxMs: c.lag.max,
  });
  return v;
}
