import type { StubRequest } from '../../test/support/slack-stub';
import type { Fault } from './cluster';
import { COMMIT_WINDOW_MS } from './execution-check';
import type { Finding } from './execution-check';

export interface SlackFacts {
  /** run id → final status, for every run. */
  runs: Array<{ id: string; status: string }>;
  requests: StubRequest[];
  faults: Fault[];
  /** How long the stub's process had not been running right before `t`: a request it read at `t` was sent that much earlier. */
  lagBefore?: (t: number) => number;
}

const FINISHED = ['SUCCESS', 'FAILED']; // the statuses that are announced

/** The run a message is about: its text reads "… Run <uuid> in project <name>: <STATUS> — …". */
export function runOfMessage(text: string): string {
  return /Run ([0-9a-f-]{36})/.exec(text)?.[1] ?? '?';
}

/** The status a message announces ('?' when it names none). */
export function statusOfMessage(text: string): string {
  return /Run [0-9a-f-]{36} in project .*?: ([A-Z]+) —/.exec(text)?.[1] ?? '?';
}

/**
 * Exactly one message answered 200 per finished run, none for the others, each announcing the
 * run's final status. A repeat is explained only by the window docs/notifications.md names: the
 * worker that posted the first message (the stub's TCP peer, mapped to a process by the OS) was
 * dead or frozen at some moment between Slack's answer and COMMIT_WINDOW_MS after it — so it could
 * not commit SENT — and every repeat came after that fault began. (A kill before the answer counts:
 * a request still in flight reaches the stub after its sender died.) A missing message is never
 * explained.
 */
export function checkSlack(f: SlackFacts): Finding[] {
  const answered = new Map<string, StubRequest[]>();
  for (const r of f.requests) {
    if (r.state !== 'answered' || r.status !== 200) continue;
    const id = runOfMessage(r.text);
    answered.set(id, [...(answered.get(id) ?? []), r]);
  }
  const out: Finding[] = [];
  for (const run of f.runs) {
    const got = (answered.get(run.id) ?? []).sort((a, b) => a.receivedAt - b.receivedAt);
    for (const m of got)
      if (statusOfMessage(m.text) !== run.status)
        out.push({
          runId: run.id,
          kind: 'violation',
          message: `run ${run.id} ended ${run.status}, but a Slack message announced ${statusOfMessage(m.text)}`,
        });
    const want = FINISHED.includes(run.status) ? 1 : 0;
    if (got.length === want) continue;
    const what = `run ${run.id} (${run.status}) announced ${got.length} times in Slack, expected ${want}`;
    if (want === 0 || got.length < want) {
      out.push({ runId: run.id, kind: 'violation', message: what });
      continue;
    }
    const [first, ...repeats] = got;
    if (!first.poster) {
      out.push({
        runId: run.id,
        kind: 'violation',
        message: `${what}; the first message's sender is unknown (no process held its connection)`,
      });
      continue;
    }
    const answeredAt = first.answeredAt ?? first.receivedAt;
    const sentBy = first.receivedAt - (f.lagBefore?.(first.receivedAt) ?? 0);
    const fault = f.faults.find(
      (x) =>
        x.pid === first.poster &&
        ((x.kind === 'kill' && x.atMs <= answeredAt + COMMIT_WINDOW_MS) ||
          (x.kind === 'freeze' && x.atMs <= answeredAt + COMMIT_WINDOW_MS && (x.untilMs ?? Infinity) >= answeredAt) ||
          // A stall (seen by the probe) while the POST was in flight or before SENT was committed
          // costs the poster its claim: it gives up on a POST Slack already has, or is taken over.
          (x.kind === 'stall' && x.atMs <= answeredAt + COMMIT_WINDOW_MS && (x.untilMs ?? x.atMs) >= sentBy)) &&
        repeats.every((r) => r.receivedAt >= x.atMs),
    );
    if (fault) {
      const lag = fault.atMs - answeredAt;
      const when =
        lag >= 0
          ? `${lag} ms after Slack answered its POST`
          : `${-lag} ms before Slack answered its POST (still in flight)`;
      const how =
        fault.kind === 'kill'
          ? 'killed'
          : fault.kind === 'freeze'
            ? 'frozen'
            : `stalled (no answer for ${(fault.untilMs ?? 0) - fault.atMs} ms)`;
      out.push({
        runId: run.id,
        kind: 'window',
        message: `${what}: its poster ${fault.label} (pid ${fault.pid}) was ${how} ${when}, before SENT could be committed`,
      });
      continue;
    }
    // The other side of the same window (docs/notifications.md, 3): the REPEAT's sender was frozen
    // or stalled with its request not yet sent, from before the first message was answered (its
    // claim lapsed and was taken over) until just before its own POST went out on waking.
    const late = repeats.map((r) =>
      f.faults.find(
        (x) =>
          x.pid === r.poster &&
          (x.kind === 'freeze' || x.kind === 'stall') &&
          x.atMs <= answeredAt &&
          x.untilMs !== undefined &&
          x.untilMs <= r.receivedAt &&
          r.receivedAt - x.untilMs <= COMMIT_WINDOW_MS,
      ),
    );
    if (late.every((x) => x !== undefined)) {
      const [x] = late;
      out.push({
        runId: run.id,
        kind: 'window',
        message: `${what}: the repeat's poster ${x!.label} (pid ${x!.pid}) was ${x!.kind === 'freeze' ? 'frozen' : 'stalled'} from ${answeredAt - x!.atMs} ms before the first message was answered until ${repeats[0].receivedAt - x!.untilMs!} ms before its own POST arrived (its claim lapsed mid-request)`,
      });
    } else
      out.push({
        runId: run.id,
        kind: 'violation',
        message: `${what}; no kill or freeze of its poster (pid ${first.poster}) explains the repeat`,
      });
  }
  return out;
}
