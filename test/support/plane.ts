import { createHmac, randomUUID } from 'node:crypto';
import type { TestApp } from './app';

export const PLANE_SECRET = 'plane_wh_0123456789abcdef0123456789abcdef';
export const PLANE_SECRET_2 = 'plane_wh_fedcba9876543210fedcba9876543210';
export const BOT_ACTOR = '0b0b0b0b-0000-4000-8000-000000000b07';
export const HUMAN_ACTOR = '11111111-2222-4333-8444-555555555555';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function pyString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (code >= 0x20 && code <= 0x7e) out += ch;
    else if (code > 0xffff) {
      // ensure_ascii writes astral characters as a UTF-16 surrogate pair
      const v = code - 0x10000;
      out += `\\u${(0xd800 + (v >> 10)).toString(16).padStart(4, '0')}\\u${(0xdc00 + (v & 0x3ff)).toString(16).padStart(4, '0')}`;
    } else out += `\\u${code.toString(16).padStart(4, '0')}`;
  }
  return `${out}"`;
}

/**
 * Python's `json.dumps(value)` with default settings, byte for byte: `", "` and `": "`
 * separators, non-ASCII as lowercase `\uXXXX`, keys in insertion order. Plane signs and sends these.
 */
export function pythonJsonDumps(value: Json): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new Error('floats are not needed here (Python repr differs)');
    return String(value);
  }
  if (typeof value === 'string') return pyString(value);
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`;
  return `{${Object.entries(value)
    .map(([k, v]) => `${pyString(k)}: ${pythonJsonDumps(v)}`)
    .join(', ')}}`;
}

export function sign(body: string | Buffer, secret = PLANE_SECRET): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

export interface WorkItem {
  id: string;
  project: string;
  workspace: string;
  name: string;
  description?: string;
}

export function newWorkItem(over: Partial<WorkItem> = {}): WorkItem {
  return { id: randomUUID(), project: randomUUID(), workspace: randomUUID(), name: 'Add a health endpoint', ...over };
}

/** A v1 `issue` body as Plane's sender builds it (key order: event, action, webhook_id, workspace_id, data, activity). */
export function v1Body(
  item: WorkItem,
  action: string,
  opts: { field?: string; actor?: string; updatedAt?: string; webhookId?: string } = {},
): string {
  const data: Json = action.startsWith('delete')
    ? { id: item.id }
    : {
        id: item.id,
        name: item.name,
        project: item.project,
        workspace: item.workspace,
        sequence_id: 42,
        priority: 'none',
        state: { id: 'c0ffee00-0000-4000-8000-000000000001', name: 'Todo', group: 'unstarted', color: '#3A3A3A' },
        labels: [],
        assignees: [],
        description_html: `<p>${item.description ?? 'Expose GET /health — returns “ok”'}</p>`,
        description_stripped: item.description ?? 'Expose GET /health — returns “ok”',
        created_by: HUMAN_ACTOR,
        updated_by: opts.actor ?? HUMAN_ACTOR,
        created_at: '2026-11-02T09:00:00.000000Z',
        updated_at: opts.updatedAt ?? '2026-11-02T09:00:00.000000Z',
      };
  return pythonJsonDumps({
    event: 'issue',
    action,
    webhook_id: opts.webhookId ?? '9d3d5c2e-7777-4a1b-9c1d-000000000001',
    workspace_id: item.workspace,
    data,
    activity: {
      field: opts.field ?? null,
      new_value: null,
      old_value: null,
      actor: {
        id: opts.actor ?? HUMAN_ACTOR,
        display_name: 'Zoë',
        first_name: 'Zoë',
        last_name: 'Åberg',
        email: 'zoe@example.com',
        avatar: '',
        avatar_url: null,
      },
      old_identifier: null,
      new_identifier: null,
    },
  });
}

/** A v2 body (hosted Plane): `event_id` is stable across retries, `delivery_id` is not. */
export function v2Body(
  item: WorkItem,
  event: string,
  opts: { eventId?: string; deliveryId?: string; actor?: string } = {},
): string {
  return pythonJsonDumps({
    version: 'v2',
    delivery_id: opts.deliveryId ?? randomUUID(),
    event_id: opts.eventId ?? randomUUID(),
    entity_id: item.id,
    entity_type: 'workitem',
    event,
    webhook_id: '9d3d5c2e-7777-4a1b-9c1d-000000000002',
    workspace_id: item.workspace,
    data: {
      id: item.id,
      name: item.name,
      project_id: item.project,
      description_stripped: item.description ?? 'None',
      created_by_id: opts.actor ?? HUMAN_ACTOR,
      updated_by_id: opts.actor ?? HUMAN_ACTOR,
      updated_at: '2026-11-02T09:00:00Z',
    },
    previous_attributes: {},
  });
}

/** Posts like Plane: the exact bytes, its headers, a fresh X-Plane-Delivery each attempt. */
export function deliver(
  t: TestApp,
  body: string,
  opts: { signature?: string | null; secret?: string; event?: string } = {},
) {
  const req = t.http
    .post('/webhooks/plane')
    .set('Content-Type', 'application/json')
    .set('User-Agent', 'Autopilot')
    .set('X-Plane-Delivery', randomUUID())
    .set('X-Plane-Event', opts.event ?? 'issue');
  const signature = opts.signature === undefined ? sign(body, opts.secret) : opts.signature;
  if (signature !== null) req.set('X-Plane-Signature', signature);
  // A string goes out as its UTF-8 bytes untouched (superagent would JSON-encode a Buffer).
  return req.send(body);
}

export function shuffle<T>(items: T[]): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}
