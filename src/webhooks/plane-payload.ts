import { createHash } from 'node:crypto';
import { DomainError } from '../common/domain-error';

/** What a delivery asks of us: create the task if new, close it, or nothing. */
export type PlaneIntent = 'upsert' | 'close' | 'none';

/** One Plane delivery, v1 or v2, reduced to what the intake needs. */
export interface PlaneEvent {
  version: 'v1' | 'v2';
  event: string;
  action: string | null;
  intent: PlaneIntent;
  /** Set when intent is 'none': why we do not act on it. */
  ignoreReason: string | null;
  workItemId: string;
  /** The Plane project (required for 'upsert'). */
  projectId: string | null;
  workspaceId: string | null;
  actorId: string | null;
  title: string;
  description: string;
  url: string | null;
  metadata: Record<string, unknown>;
}

const MAX_ID = 255;
const V1_ACTIONS: Record<string, PlaneIntent> = {
  created: 'upsert',
  create: 'upsert',
  // An `updated` for an item we never saw creates it: a missed or late `created` must not lose it.
  updated: 'upsert',
  update: 'upsert',
  deleted: 'close',
  delete: 'close',
  archived: 'close',
};
const V2_EVENTS: Record<string, PlaneIntent> = {
  'workitem.created': 'upsert',
  'workitem.updated': 'upsert',
  'workitem.deleted': 'close',
  'workitem.archived': 'close',
};

const bad = (message: string) => new DomainError(400, 'Bad Request', message);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A usable string; v2 sends nulls as the string "None". */
function text(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const s = v.trim();
  return s === '' || s === 'None' ? null : s;
}

/** An id field that may also arrive expanded as `{id, ...}`. */
function idOf(v: unknown): string | null {
  const s = isObject(v) ? text(v.id) : text(v);
  return s !== null && s.length <= MAX_ID ? s : null;
}

function required(v: unknown, what: string): string {
  const id = idOf(v);
  if (id === null) throw bad(`${what} is required (a non-empty id of at most ${MAX_ID} characters)`);
  return id;
}

/** The dedupe key: v1 retries are byte-identical (hash the raw body); v2 has a stable event_id. */
export function planeDedupeKey(version: PlaneEvent['version'], rawBody: Buffer, body: Record<string, unknown>): string {
  if (version === 'v2') return `event:${String(body.event_id)}`;
  return `sha256:${createHash('sha256').update(rawBody).digest('hex')}`;
}

export function planeVersion(body: Record<string, unknown>): PlaneEvent['version'] {
  const event = typeof body.event === 'string' ? body.event : '';
  return body.event_id !== undefined || body.version !== undefined || event.includes('.') ? 'v2' : 'v1';
}

/** Parses a Plane body (already JSON-decoded); a DomainError 400 names what is missing. */
export function parsePlaneEvent(body: unknown): PlaneEvent {
  if (!isObject(body)) throw bad('body must be a JSON object');
  const event = text(body.event);
  if (event === null) throw bad('event is required');
  if (!isObject(body.data)) throw bad('data must be an object');
  return planeVersion(body) === 'v2' ? parseV2(body, event, body.data) : parseV1(body, event, body.data);
}

function parseV1(body: Record<string, unknown>, event: string, data: Record<string, unknown>): PlaneEvent {
  const action = text(body.action);
  if (action === null) throw bad('action is required');
  const workItemId = required(data.id, 'data.id');
  const acted = event === 'issue' ? V1_ACTIONS[action] : undefined;
  const intent: PlaneIntent = acted ?? 'none';
  const activity = isObject(body.activity) ? body.activity : {};
  const actor = isObject(activity.actor) ? idOf(activity.actor.id) : null;
  const fallbackActor = action.startsWith('create') ? idOf(data.created_by) : idOf(data.updated_by);
  return finish({
    version: 'v1',
    event,
    action,
    intent,
    ignoreReason: acted ? null : event === 'issue' ? 'action_not_handled' : 'event_not_handled',
    workItemId,
    projectId: idOf(data.project) ?? idOf(data.project_id),
    workspaceId: idOf(body.workspace_id) ?? idOf(data.workspace),
    actorId: actor ?? fallbackActor,
    data,
  });
}

function parseV2(body: Record<string, unknown>, event: string, data: Record<string, unknown>): PlaneEvent {
  if (idOf(body.event_id) === null) throw bad('event_id is required in a v2 payload');
  const workItemId = required(data.id ?? body.entity_id, 'data.id');
  const acted = V2_EVENTS[event];
  const action = event.includes('.') ? event.slice(event.lastIndexOf('.') + 1) : null;
  const actorId = event.endsWith('.created') ? idOf(data.created_by_id) : (idOf(data.updated_by_id) ?? idOf(data.created_by_id));
  return finish({
    version: 'v2',
    event,
    action,
    intent: acted ?? 'none',
    ignoreReason: acted ? null : 'event_not_handled',
    workItemId,
    projectId: idOf(data.project_id) ?? idOf(data.project),
    workspaceId: idOf(body.workspace_id) ?? idOf(data.workspace_id),
    actorId,
    data,
  });
}

type Draft = Omit<PlaneEvent, 'title' | 'description' | 'url' | 'metadata'> & { data: Record<string, unknown> };

function finish({ data, ...e }: Draft): PlaneEvent {
  if (e.intent === 'upsert' && e.projectId === null) throw bad('data.project is required for a work-item event');
  const state = isObject(data.state) ? { id: idOf(data.state.id), name: text(data.state.name), group: text(data.state.group) } : null;
  const updatedAt = text(data.updated_at);
  let description: string | undefined;
  return {
    ...e,
    title: (text(data.name) ?? `Plane work item ${e.workItemId}`).slice(0, 1000),
    // Only a delivery that creates a task needs it, and HTML to text is the dearest part of the
    // parse: a retry (most deliveries) never pays for it.
    get description(): string {
      return (description ??= descriptionText(data));
    },
    url: text(data.url),
    metadata: {
      workspaceId: e.workspaceId,
      projectId: e.projectId,
      sequenceId: typeof data.sequence_id === 'number' ? data.sequence_id : null,
      priority: text(data.priority),
      state,
      updatedAt: updatedAt !== null && !Number.isNaN(Date.parse(updatedAt)) ? updatedAt : null,
    },
  };
}

/** The description as plain text: Plane sends it stripped, as HTML and/or as a ProseMirror document. */
export function descriptionText(data: Record<string, unknown>): string {
  const stripped = text(data.description_stripped);
  if (stripped !== null) return stripped;
  const html = text(data.description_html);
  if (html !== null) return htmlToText(html);
  if (typeof data.description === 'string') return text(data.description) ?? '';
  if (isObject(data.description)) return proseMirrorText(data.description).trim();
  return '';
}

function htmlToText(html: string): string {
  return html
    .replace(/<(br|\/p|\/li|\/h[1-6]|\/div)\s*\/?>/gi, '\n')
    .replace(/<[^>]*>/g, '')
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

const BLOCKS = new Set(['paragraph', 'heading', 'listItem', 'blockquote', 'codeBlock']);

function proseMirrorText(node: Record<string, unknown>, depth = 0): string {
  if (depth > 50) return '';
  if (typeof node.text === 'string') return node.text;
  const children = Array.isArray(node.content) ? node.content.filter(isObject) : [];
  const inner = children.map((c) => proseMirrorText(c, depth + 1)).join('');
  return BLOCKS.has(String(node.type)) ? `${inner}\n` : inner;
}

/** The authoring run's requirement: the work item's name and description as text. */
export function requirementOf(e: Pick<PlaneEvent, 'title' | 'description'>): string {
  return e.description ? `${e.title}\n\n${e.description}` : e.title;
}
