import type { Fault } from './cluster';
import type { Execution } from './witness';

/** How long a finalize may take to commit after the command's exit (a crash inside it re-runs the run). */
export const COMMIT_WINDOW_MS = 1000;
/** How long the watchdog may take to kill a dead worker's command group (50–150 ms seen on a loaded 2-core box). */
export const WATCHDOG_MS = 500;

export interface RunFinal {
  id: string;
  status: string;
  fencing_token: string;
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
  /** Worker pid that claimed a run with a fencing token (from run_events), if known. */
  claimer: (runId: string, token: number) => number | undefined;
  lockTtlMs: number;
}

/** When an execution ended: its end line, or — killed — the last moment it was seen alive. */
export function endOf(e: Execution): number {
  return e.end ? e.end.atMs : e.lastSeenAlive;
}

/**
 * Why a completed execution was not recorded, if a fault explains it: its worker was killed
 * between the command's exit and the commit (or the watchdog killed the group a moment too late),
 * or its worker was frozen before its lock could lapse. Anything else is unexplained.
 */
function explain(e: Execution, f: ExecutionFacts): string | undefined {
  const pid = f.claimer(e.start.runId, e.start.token);
  if (pid === undefined || !e.end) return undefined;
  const d = e.end.atMs;
  for (const fault of f.faults.filter((x) => x.pid === pid)) {
    const lag = d - fault.atMs;
    const when = lag <= 0 ? `${-lag} ms after the command exited` : `${lag} ms before the command exited`;
    if (fault.kind === 'kill' && lag >= -COMMIT_WINDOW_MS && lag <= WATCHDOG_MS)
      return `attempt ${e.start.attempt}'s worker (pid ${pid}) was killed ${when}`;
    if (fault.kind === 'freeze' && lag >= -COMMIT_WINDOW_MS && lag <= f.lockTtlMs)
      return `attempt ${e.start.attempt}'s worker (pid ${pid}) froze ${when}, within the lock TTL`;
  }
  return undefined;
}

/**
 * The invariants over what really executed: no run completed twice, no two executions of a run
 * overlapping in time, fencing tokens only growing, a SUCCESS recorded by the execution that
 * completed, no command finishing after its worker was killed.
 */
export function checkExecutions(f: ExecutionFacts): Finding[] {
  const out: Finding[] = [];
  const byRun = new Map<string, Execution[]>();
  for (const e of f.executions) byRun.set(e.start.runId, [...(byRun.get(e.start.runId) ?? []), e]);
  for (const r of f.runs) {
    const bad = (message: string) => out.push({ runId: r.id, kind: 'violation', message: `run ${r.id}: ${message}` });
    const execs = (byRun.get(r.id) ?? []).sort((a, b) => a.start.atMs - b.start.atMs);
    const done = execs.filter((e) => e.end?.kind === 'done');
    const recorded = done.find((e) => String(e.start.token) === String(r.fencing_token));
    if (r.status === 'SUCCESS' && !recorded) bad(`SUCCESS with token ${r.fencing_token}, but no execution with that token completed`);
    if (done.length > 1) {
      const extra = done.filter((e) => e !== (recorded ?? done[done.length - 1]));
      const reasons = extra.map((e) => explain(e, f));
      const what = `completed ${done.length} times (attempts ${done.map((d) => d.start.attempt).join(', ')})`;
      if (reasons.every(Boolean)) out.push({ runId: r.id, kind: 'window', message: `run ${r.id} ${what}: ${reasons.join('; ')}` });
      else bad(`${what}; the extra completion is not explained by a crash or freeze of its worker`);
    }
    let prev: Execution | undefined;
    let longest: Execution | undefined; // the earlier execution that ended last
    for (const e of execs) {
      if (prev && e.start.token <= prev.start.token)
        bad(
          `fencing token did not grow (attempt ${prev.start.attempt} token ${prev.start.token}, then attempt ${e.start.attempt} token ${e.start.token})`,
        );
      if (longest && endOf(longest) > e.start.atMs) {
        const how = longest.end
          ? `its ${longest.end.kind} line came ${endOf(longest) - e.start.atMs} ms later`
          : `it was seen alive ${endOf(longest) - e.start.atMs} ms later`;
        bad(
          `attempt ${e.start.attempt} (token ${e.start.token}) started while attempt ${longest.start.attempt} (token ${longest.start.token}, pid ${longest.start.pid}) still ran: ${how}`,
        );
      }
      const pid = f.claimer(r.id, e.start.token);
      const kill = f.faults.find((x) => x.kind === 'kill' && x.pid === pid && x.atMs >= e.start.atMs);
      if (kill && e.end && e.end.atMs - kill.atMs > WATCHDOG_MS)
        bad(`attempt ${e.start.attempt} wrote "${e.end.kind}" ${e.end.atMs - kill.atMs} ms after its worker (pid ${pid}) was killed`);
      prev = e;
      if (!longest || endOf(e) >= endOf(longest)) longest = e;
    }
  }
  return out;
}
