import type { Fault } from './cluster';
import { aliveUntil, COMPLETION_KINDS, deadBy, Execution } from './witness';

/** How long a finalize may take to commit after the command's exit (a crash inside it re-runs the run). */
export const COMMIT_WINDOW_MS = 1000;
/**
 * How long a killed worker's command may live on: until the worker's run lock could lapse. The lock
 * was last extended at most a third of its TTL before the kill, so it can lapse two thirds of a TTL
 * after it; a command alive after that could run beside the next attempt. (The watchdog usually
 * needs 20–200 ms; on a 2-core box at load 6 it has taken 500 ms.)
 */
export function killBoundMs(lockTtlMs: number): number {
  return Math.floor((lockTtlMs * 2) / 3);
}

export interface RunFinal {
  id: string;
  status: string;
  fencing_token: string;
  /** What the run was asked to do: the requirement as sent (or as stored, for runs made by Plane intake). */
  requirement: string;
}

export interface Finding {
  runId: string;
  /** violation: breaks an invariant. window: a re-execution the at-least-once window explains. */
  kind: 'violation' | 'window';
  message: string;
}

export interface ExecutionFacts {
  runs: RunFinal[];
  executions: Execution[];
  faults: Fault[];
  /** Every worker process the cluster started: pid → label. */
  workers: Map<number, string>;
  lockTtlMs: number;
  maxAttempts: number;
}

/** The status a run must end in, from what it was asked to do (the fake orchestrator's rules). */
export function expectedStatus(requirement: string, maxAttempts: number): 'SUCCESS' | 'FAILED' {
  if (requirement.includes('fail')) return 'FAILED';
  const transient = /transient=(\d+)/.exec(requirement);
  return transient && Number(transient[1]) >= maxAttempts ? 'FAILED' : 'SUCCESS';
}

const workerOf = (e: Execution, f: ExecutionFacts) =>
  e.worker === undefined
    ? 'no worker recorded'
    : e.worker === 0
      ? 'no worker (orphan)'
      : `${f.workers.get(e.worker) ?? 'unknown'} (pid ${e.worker})`;

/**
 * Why a completed execution was not recorded, if a fault explains it: the worker that spawned it
 * (from the command's own record) was killed between the command's exit and the commit (or the
 * watchdog killed the group a moment too late), or was frozen before its lock could lapse.
 */
function explain(e: Execution, f: ExecutionFacts): string | undefined {
  if (!e.end || !e.worker) return undefined;
  return explainAt(
    e.worker,
    e.end.atMs,
    `attempt ${e.start.attempt}'s worker ${workerOf(e, f)}`,
    { what: 'the command exited', around: "the command's exit" },
    f,
  );
}

/**
 * A fault of `worker` that explains an effect at `atMs` not being recorded: a kill within the
 * commit window before it (or a moment after: the watchdog's reaction), a freeze or a stall
 * beginning at most one lock TTL before it. Shared by the run check and the steps check.
 */
export function explainAt(
  worker: number,
  atMs: number,
  who: string,
  event: { what: string; around: string },
  f: Pick<ExecutionFacts, 'faults' | 'lockTtlMs'>,
): string | undefined {
  const { what, around } = event;
  for (const fault of f.faults.filter((x) => x.pid === worker)) {
    const lag = atMs - fault.atMs;
    const when = lag <= 0 ? `${-lag} ms after ${what}` : `${lag} ms before ${what}`;
    if (fault.kind === 'kill' && lag >= -COMMIT_WINDOW_MS && lag <= killBoundMs(f.lockTtlMs))
      return `${who} was killed ${when}`;
    if (fault.kind === 'freeze' && lag >= -COMMIT_WINDOW_MS && lag <= f.lockTtlMs)
      return `${who} froze ${when}, within the lock TTL`;
    // A stall nobody injected (seen by the probe): its heartbeat came late, as in a short freeze,
    // judged by the same rule (it began at most one TTL before the effect).
    if (fault.kind === 'stall' && lag >= -COMMIT_WINDOW_MS && lag <= f.lockTtlMs)
      return `${who} did not answer for ${(fault.untilMs ?? fault.atMs) - fault.atMs} ms around ${around} (a stall: ${when})`;
  }
  return undefined;
}

/** How an execution's end compares with a deadline: its end line, else its bounds [last seen alive, dead by]. */
function outlived(e: Execution, deadline: number): string | undefined {
  if (e.end) return e.end.atMs > deadline ? `wrote "${e.end.kind}" ${e.end.atMs - deadline} ms past it` : undefined;
  const dead = deadBy(e);
  if (e.lastSeenAlive > deadline) return `was seen alive ${e.lastSeenAlive - deadline} ms past it`;
  if (dead === undefined) return 'was never seen dead';
  return dead > deadline ? `was not proven dead until ${dead - deadline} ms past it (possible)` : undefined;
}

/**
 * The invariants over what really executed, from the commands' own lines and the OS only: every
 * run ends as it was built to (SUCCESS unless it was made to fail), no run completed twice (a
 * `fail` counts like a `done`), no two executions of a run overlapping in time (bounded
 * conservatively: a killed one lasted at least until last seen alive and possibly until first
 * proven dead), fencing tokens only growing, a SUCCESS recorded by the execution that completed,
 * no command outliving its worker's kill -9 (or its worker's freeze past the lock TTL), no command
 * without a known worker.
 */
export function checkExecutions(f: ExecutionFacts): Finding[] {
  const out: Finding[] = [];
  const byRun = new Map<string, Execution[]>();
  for (const e of f.executions) byRun.set(e.start.runId, [...(byRun.get(e.start.runId) ?? []), e]);
  const known = new Set(f.runs.map((r) => r.id));
  for (const [runId, execs] of byRun)
    if (!known.has(runId))
      out.push({
        runId,
        kind: 'violation',
        message: `run ${runId}: ${execs.length} execution(s) of a run the database does not have`,
      });
  for (const r of f.runs) {
    const bad = (message: string) => out.push({ runId: r.id, kind: 'violation', message: `run ${r.id}: ${message}` });
    const execs = (byRun.get(r.id) ?? []).sort((a, b) => a.start.atMs - b.start.atMs);
    const want = expectedStatus(r.requirement, f.maxAttempts);
    if (r.status !== want)
      bad(`ended ${r.status}, but it was built to end ${want} (requirement "${r.requirement.slice(0, 80)}")`);
    const completed = execs.filter((e) => e.end && COMPLETION_KINDS.includes(e.end.kind));
    const recorded = completed.find((e) => String(e.start.token) === String(r.fencing_token));
    if (r.status === 'SUCCESS' && recorded?.end?.kind !== 'done')
      bad(`SUCCESS with token ${r.fencing_token}, but no execution with that token completed`);
    if (completed.length > 1) {
      const extra = completed.filter((e) => e !== (recorded ?? completed[completed.length - 1]));
      const reasons = extra.map((e) => explain(e, f));
      const what = `completed ${completed.length} times (attempts ${completed.map((d) => `${d.start.attempt} ${d.end!.kind}`).join(', ')})`;
      if (reasons.every(Boolean))
        out.push({ runId: r.id, kind: 'window', message: `run ${r.id} ${what}: ${reasons.join('; ')}` });
      else bad(`${what}; the extra completion is not explained by a kill or freeze of the worker that ran it`);
    }
    for (const [i, e] of execs.entries()) {
      const prev = execs[i - 1];
      if (prev && e.start.token <= prev.start.token)
        bad(
          `fencing token did not grow (attempt ${prev.start.attempt} token ${prev.start.token}, then attempt ${e.start.attempt} token ${e.start.token})`,
        );
      for (const p of execs.slice(0, i)) {
        const s = e.start.atMs;
        const dead = deadBy(p);
        const who = `attempt ${e.start.attempt} (token ${e.start.token}) started while attempt ${p.start.attempt} (token ${p.start.token}, pid ${p.start.pid})`;
        if (aliveUntil(p) > s)
          bad(
            `${who} still ran: ${p.end ? `its ${p.end.kind} line came` : 'it was seen alive'} ${aliveUntil(p) - s} ms later`,
          );
        else if (dead === undefined || dead > s)
          bad(
            `${who} may still have run: not proven dead until ${dead === undefined ? 'never' : `${dead - s} ms later`} (possible overlap)`,
          );
      }
      checkWorker(e, f, bad);
    }
  }
  return out;
}

/** The command's worker is one we started; a killed worker's command dies with it, a frozen one's before its lock lapses. */
function checkWorker(e: Execution, f: ExecutionFacts, bad: (m: string) => void): void {
  const what = `attempt ${e.start.attempt} (token ${e.start.token}, pid ${e.start.pid})`;
  if (e.worker === undefined) return bad(`${what} recorded no worker: cannot tell which process ran it`);
  const bound = killBoundMs(f.lockTtlMs);
  if (e.worker === 0) {
    // Its worker was gone before the command could look: the watchdog must kill it at once.
    const why = outlived(e, e.start.atMs + bound);
    if (why) bad(`${what} started with no worker alive (orphan) and ${why} (${bound} ms after its start)`);
    return;
  }
  if (!f.workers.has(e.worker))
    return bad(`${what} was spawned by pid ${e.worker}, which is none of the cluster's workers`);
  // A kill long before the command started was of an earlier process with the same pid.
  for (const fault of f.faults.filter((x) => x.pid === e.worker && x.atMs > e.start.atMs - 1000)) {
    if (fault.kind === 'kill') {
      const why = outlived(e, Math.max(fault.atMs, e.start.atMs) + bound);
      if (why)
        bad(
          `${what} outlived its worker ${workerOf(e, f)}, killed at ${fault.atMs}: it ${why} (${bound} ms after the kill)`,
        );
    }
    if (fault.kind === 'freeze' && e.start.atMs < (fault.untilMs ?? Infinity) && (deadBy(e) ?? Infinity) > fault.atMs) {
      const why = outlived(e, Math.max(fault.atMs, e.start.atMs) + f.lockTtlMs);
      if (why)
        bad(`${what} outlived its frozen worker ${workerOf(e, f)}'s lock: it ${why} (one lock TTL after the freeze)`);
    }
  }
}

/** How long each killed worker's commands lived on after the kill (the watchdog's reaction), from the commands' ends. */
export function orphanLives(executions: Execution[], faults: Fault[]): number[] {
  const lives: number[] = [];
  for (const e of executions) {
    const kill = faults.find((x) => x.kind === 'kill' && x.pid === e.worker && e.worker);
    const end = deadBy(e);
    if (kill && end !== undefined && end >= kill.atMs) lives.push(end - Math.max(kill.atMs, e.start.atMs));
  }
  return lives;
}
