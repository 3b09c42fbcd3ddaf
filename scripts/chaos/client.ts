import { randomUUID } from 'node:crypto';
import { sign } from '../../test/support/plane';

export interface Answer {
  status: number;
  body: any;
}

/**
 * HTTP to the API process. A network error (the API restarting, a refused connection) answers
 * status 0 instead of throwing: the storm goes on and the caller counts it.
 */
export class ApiClient {
  /** Every run this client created, with the requirement it sent: what the run was built to do. */
  readonly requirements = new Map<string, string>();

  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  async call(method: string, path: string, body?: unknown): Promise<Answer> {
    try {
      const res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${this.apiKey}`,
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      return { status: res.status, body: text ? safeJson(text) : null };
    } catch (err) {
      return { status: 0, body: { error: String(err) } };
    }
  }

  async createProject(maxConcurrentRuns: number): Promise<string> {
    const a = await this.call('POST', '/api/projects', {
      name: `chaos-${randomUUID().slice(0, 8)}`,
      maxConcurrentRuns,
    });
    if (a.status !== 201) throw new Error(`create project: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body.id;
  }

  async createRun(projectId: string, requirement: string, dispatch: boolean): Promise<string> {
    for (let i = 0; ; i++) {
      const a = await this.call('POST', `/api/projects/${projectId}/runs`, { requirement, dispatch });
      if (a.status === 201) {
        this.requirements.set(a.body.id, requirement);
        return a.body.id;
      }
      if (i >= 4) throw new Error(`create run: ${a.status} ${JSON.stringify(a.body)}`);
      await new Promise((r) => setTimeout(r, 200 * (i + 1)));
    }
  }

  dispatch(runId: string): Promise<Answer> {
    return this.call('POST', `/api/runs/${runId}/dispatch`);
  }

  async events(runId: string): Promise<
    Array<{
      from: string;
      to: string;
      at: string;
      attempt: number;
      fencingToken: number;
      workerId: string;
      reason: string;
    }>
  > {
    const a = await this.call('GET', `/api/runs/${runId}/events`);
    return a.status === 200 ? a.body.items : [];
  }

  /**
   * Posts like Plane does: the exact signed bytes, a fresh X-Plane-Delivery on every attempt.
   * Like Plane, it retries a network error (with the same bytes) but never a 4xx/5xx answer.
   */
  async deliverPlane(body: string, secret: string): Promise<Answer> {
    const signature = sign(body, secret);
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetch(`${this.baseUrl}/webhooks/plane`, {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            'User-Agent': 'Autopilot',
            'X-Plane-Delivery': randomUUID(),
            'X-Plane-Event': 'issue',
            'X-Plane-Signature': signature,
          },
          body,
          signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        return { status: res.status, body: text ? safeJson(text) : null };
      } catch (err) {
        if (attempt >= 4) return { status: 0, body: { error: String(err) } };
        await new Promise((r) => setTimeout(r, 300 * (attempt + 1)));
      }
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Tally of answers by a label (e.g. "202", "409", "dup"). */
export class Tally {
  private readonly counts = new Map<string, number>();
  add(label: string, n = 1): void {
    this.counts.set(label, (this.counts.get(label) ?? 0) + n);
  }
  entries(): Array<[string, number]> {
    return [...this.counts.entries()];
  }
  get(label: string): number {
    return this.counts.get(label) ?? 0;
  }
  toString(): string {
    return [...this.counts.entries()].map(([k, v]) => `${k}=${v}`).join(' ');
  }
}
