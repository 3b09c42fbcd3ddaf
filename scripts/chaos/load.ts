import { BOT_ACTOR, newWorkItem, PLANE_SECRET, v1Body } from '../../test/support/plane';
import { ApiClient, Tally } from './client';
import { mapLimit, shuffle } from './util';

/** Anything that talks to the API: a chaos cluster, or the demo. */
export interface HasClient {
  client: ApiClient;
}

export interface RunLoad {
  runs: number;
  /** Dispatch requests per run, sent concurrently (a storm of clicks / a retrying producer). */
  copies: number;
  sleepMin: number;
  sleepMax: number;
  /** Share of runs that exit 75 on their first attempt (retried), and that fail for good. */
  transientShare?: number;
  failShare?: number;
  maxConcurrentRuns?: number;
}

export interface RunLoadResult {
  runIds: string[];
  answers: Tally;
  /** Runs whose dispatch storm was not accepted exactly once. */
  badStorms: string[];
}

/** Requirement text the fake orchestrator acts on (sleep=N, transient=N, fail). */
function requirement(i: number, rand: () => number, spec: RunLoad): string {
  const secs = (spec.sleepMin + rand() * (spec.sleepMax - spec.sleepMin)).toFixed(1);
  const roll = rand();
  const extra =
    roll < (spec.failShare ?? 0)
      ? ' fail'
      : roll < (spec.failShare ?? 0) + (spec.transientShare ?? 0)
        ? ' transient=1'
        : '';
  return `chaos run ${i} sleep=${secs}${extra}`;
}

/** Creates PENDING runs (in a new project unless given one), then dispatches each of them `copies` times at once. */
export async function dispatchStorm(
  c: HasClient,
  rand: () => number,
  spec: RunLoad,
  projectId?: string,
): Promise<RunLoadResult> {
  const project = projectId ?? (await c.client.createProject(spec.maxConcurrentRuns ?? 12));
  const runIds = await mapLimit(
    Array.from({ length: spec.runs }, (_, i) => i),
    16,
    (i) => c.client.createRun(project, requirement(i, rand, spec), false),
  );
  const requests = shuffle(
    rand,
    runIds.flatMap((id) => Array.from({ length: spec.copies }, () => id)),
  );
  const answers = new Tally();
  const accepted = new Map<string, number>();
  await mapLimit(requests, 48, async (id) => {
    const a = await c.client.dispatch(id);
    answers.add(String(a.status));
    if (a.status === 202) accepted.set(id, (accepted.get(id) ?? 0) + 1);
  });
  return { runIds, answers, badStorms: runIds.filter((id) => accepted.get(id) !== 1) };
}

export interface PlaneLoad {
  items: number;
  /** Copies of each `created` body (Plane retries: same bytes, fresh X-Plane-Delivery). */
  copies: number;
  /** Per-field `updated` events per item, each sent twice (Plane's identical duplicates). */
  fields: number;
  botItems: number;
}

export interface PlaneLoadResult {
  workItems: string[];
  botItems: string[];
  answers: Tally;
  sent: number;
}

const FIELDS = ['name', 'state_id', 'priority', 'labels', 'assignees', 'description'];

/** Many deliveries per work item, shuffled and concurrent, as Plane sends them after edits. */
export async function planeStorm(c: HasClient, rand: () => number, spec: PlaneLoad): Promise<PlaneLoadResult> {
  const bodies: string[] = [];
  const workItems: string[] = [];
  const botItems: string[] = [];
  // Few Plane projects: their work items then share onceflow projects (and their run caps).
  const projects = Array.from({ length: 2 }, () => newWorkItem().project);
  for (let i = 0; i < spec.items; i++) {
    const item = newWorkItem({
      project: projects[i % projects.length],
      name: `Chaos item ${i} sleep=0.${1 + Math.floor(rand() * 5)}`,
    });
    workItems.push(item.id);
    for (let k = 0; k < spec.copies; k++) bodies.push(v1Body(item, 'created'));
    for (const [j, field] of FIELDS.slice(0, spec.fields).entries()) {
      const body = v1Body({ ...item, name: `${item.name} (edited)` }, 'updated', {
        field,
        updatedAt: `2026-11-02T09:0${j + 1}:00.000000Z`,
      });
      bodies.push(body, body);
    }
  }
  for (let i = 0; i < spec.botItems; i++) {
    const item = newWorkItem({ name: `Bot item ${i}` });
    botItems.push(item.id);
    bodies.push(
      v1Body(item, 'created', { actor: BOT_ACTOR }),
      v1Body(item, 'updated', { actor: BOT_ACTOR, field: 'state_id' }),
    );
  }
  const answers = new Tally();
  await mapLimit(shuffle(rand, bodies), 32, async (body) => {
    const a = await c.client.deliverPlane(body, PLANE_SECRET);
    answers.add(a.status === 0 ? 'network' : a.status >= 500 ? `5xx` : String(a.body?.status ?? a.status));
  });
  return { workItems, botItems, answers, sent: bodies.length };
}

/**
 * Load that keeps coming while faults are injected: each `launch()` starts one more dispatch
 * storm of `spec.runs` runs in the same project; `settle()` waits for all of them.
 */
export class Waves {
  private readonly pending: Promise<RunLoadResult>[] = [];
  private project: Promise<string> | undefined;

  constructor(
    private readonly c: HasClient,
    private readonly rand: () => number,
    private readonly spec: RunLoad,
  ) {}

  launch(): void {
    this.project ??= this.c.client.createProject(this.spec.maxConcurrentRuns ?? 12);
    this.pending.push(this.project.then((p) => dispatchStorm(this.c, this.rand, this.spec, p)));
  }

  async settle(): Promise<RunLoadResult> {
    const all = await Promise.all(this.pending);
    const answers = new Tally();
    for (const r of all) for (const [k, n] of r.answers.entries()) answers.add(k, n);
    return { runIds: all.flatMap((r) => r.runIds), answers, badStorms: all.flatMap((r) => r.badStorms) };
  }
}
