import type { StubRequest } from '../../test/support/slack-stub';
import type { Fault } from './cluster';
import { COMMIT_WINDOW_MS } from './execution-check';
import type { Finding } from './execution-check';

export interface SlackFacts {
  /** run id → status, for every run. */
  runs: Array<{ id: string; status: string }>;
  requests: StubRequest[];
  faults: Fault[];
}

const FINISHED = ['SUCCESS', 'FAILED']; // the statuses that are announced

/** The run a message is about: its text starts with "… Run <uuid> in project …". */
export function runOfMessage(text: string): string {
  return /Run ([0-9a-f-]{36})/.exec(text)?.[1] ?? '?';
}

/**
 * Exactly one message answered 200 per finished run, none for the others. A repeat is explained
 * only by the window docs/notifications.md names: a worker killed or frozen between the moment
 * Slack had the first POST and the commit of SENT (the stub does not know which worker posted,
 * so any worker's fault in that window counts). A missing message is never explained.
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
    const got = answered.get(run.id) ?? [];
    const want = FINISHED.includes(run.status) ? 1 : 0;
    if (got.length === want) continue;
    const what = `run ${run.id} (${run.status}) announced ${got.length} times in Slack, expected ${want}`;
    if (want === 0 || got.length < want) {
      out.push({ runId: run.id, kind: 'violation', message: what });
      continue;
    }
    const first = got.sort((a, b) => a.receivedAt - b.receivedAt)[0];
    const fault = f.faults.find(
      (x) =>
        (x.kind === 'kill' || x.kind === 'freeze') &&
        x.atMs >= first.receivedAt &&
        x.atMs <= (first.answeredAt ?? first.receivedAt) + COMMIT_WINDOW_MS,
    );
    if (fault)
      out.push({
        runId: run.id,
        kind: 'window',
        message: `${what}: ${fault.label} (pid ${fault.pid}) was ${fault.kind === 'kill' ? 'killed' : 'frozen'} ${fault.atMs - (first.answeredAt ?? first.receivedAt)} ms after Slack answered the first POST, before SENT could be committed`,
      });
    else out.push({ runId: run.id, kind: 'violation', message: `${what}; no worker crash or freeze explains the repeat` });
  }
  return out;
}
