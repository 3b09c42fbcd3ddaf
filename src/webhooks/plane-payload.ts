import { createHash } from 'node:crypto';
import { clip, descriptionText } from './plane-description';
import { invalidPayload } from './webhooks.errors';

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
  /** v2 only: the sender's event id, stable across retries (the dedupe key). */
  eventId: string | null;
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
const MAX_TITLE = 1000;
const MAX_URL = 2048;
/**
 * Maps, not object literals: the keys come from the sender, and `constructor`, `__proto__` or
 * `toString` looked up on a plain object find Object.prototype's members (a truthy "intent").
 */
const V1_ACTIONS: ReadonlyMap<string, PlaneIntent> = new Map([
  ['created', 'upsert'],
  ['create', 'upsert'],
  // An `updated` for an item we never saw creates it: a missed or late `created` must not lose it.
  ['updated', 'upsert'],
  ['update', 'upsert'],
  ['deleted', 'close'],
  ['delete', 'close'],
  ['archived', 'close'],
]);
const V2_EVENTS: ReadonlyMap<string, PlaneIntent> = new Map([
  ['workitem.created', 'upsert'],
  ['workitem.updated', 'upsert'],
  ['workitem.deleted', 'close'],
  ['workitem.archived', 'close'],
]);

/** ISO 8601 as Plane writes it; Postgres must be able to compare it as a timestamptz later. */
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$/;

const bad = invalidPayload;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const LONE_SURROGATES = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A usable string (v2 sends nulls as the string "None"), at most `max` characters, else null.
 * NUL is dropped and a lone surrogate becomes U+FFFD: text we derive always fits a text column
 * (the payload itself is checked as a whole before it is stored, see plane-delivery.ts).
 */
function text(v: unknown, max = Number.MAX_SAFE_INTEGER): string | null {
  if (typeof v !== 'string') return null;
  const s = v
    .replace(/\u0000/g, '')
    .replace(LONE_SURROGATES, '\ufffd')
    .trim();
  return s === '' || s === 'None' || s.length > max ? null : s;
}

/** An id field that may also arrive expanded as `{id, ...}`. */
function idOf(v: unknown): string | null {
  return isObject(v) ? text(v.id, MAX_ID) : text(v, MAX_ID);
}

function required(v: unknown, what: string): string {
  const id = idOf(v);
  if (id === null) throw bad(`${what} is required (a non-empty id of at most ${MAX_ID} characters)`);
  return id;
}

/** The dedupe key: v1 retries are byte-identical (hash the raw body); v2 has a stable event_id. */
export function planeDedupeKey(e: Pick<PlaneEvent, 'version' | 'eventId'>, rawBody: Buffer): string {
  return planeDedupeKeyOf(e, planeContentKey(rawBody));
}

/** planeDedupeKey() with the body's content key already at hand. */
export function planeDedupeKeyOf(e: Pick<PlaneEvent, 'version' | 'eventId'>, contentKey: string): string {
  return e.version === 'v2' ? `event:${e.eventId}` : contentKey;
}

/** The key of a body's exact bytes: a v1 delivery's dedupe key, and how any byte-identical retry is known. */
export function planeContentKey(rawBody: Buffer): string {
  return `sha256:${createHash('sha256').update(rawBody).digest('hex')}`;
}

export function planeVersion(body: Record<string, unknown>): PlaneEvent['version'] {
  const event = typeof body.event === 'string' ? body.event : '';
  return body.event_id !== undefined || body.version !== undefined || event.includes('.') ? 'v2' : 'v1';
}

/**
 * Parses a Plane body (already JSON-decoded); an INVALID_PAYLOAD error names what is missing. `ignore`
 * turns the event into one we record but do not act on, with that reason (a body we could only
 * store cleaned, see plane-delivery.ts).
 */
export function parsePlaneEvent(body: unknown, ignore?: string): PlaneEvent {
  if (!isObject(body)) throw bad('body must be a JSON object');
  const event = text(body.event, MAX_ID);
  if (event === null) throw bad(`event is required (a string of at most ${MAX_ID} characters)`);
  if (!isObject(body.data)) throw bad('data must be an object');
  const draft = planeVersion(body) === 'v2' ? parseV2(body, event, body.data) : parseV1(body, event, body.data);
  return toEvent(ignore === undefined ? draft : { ...draft, intent: 'none', ignoreReason: ignore });
}

function parseV1(body: Record<string, unknown>, event: string, data: Record<string, unknown>): Draft {
  const action = text(body.action, MAX_ID);
  if (action === null) throw bad(`action is required (a string of at most ${MAX_ID} characters)`);
  const workItemId = required(data.id, 'data.id');
  const acted = event === 'issue' ? V1_ACTIONS.get(action) : undefined;
  const intent: PlaneIntent = acted ?? 'none';
  const activity = isObject(body.activity) ? body.activity : {};
  const actor = isObject(activity.actor) ? idOf(activity.actor.id) : null;
  const fallbackActor = action.startsWith('create') ? idOf(data.created_by) : idOf(data.updated_by);
  return {
    version: 'v1',
    event,
    action,
    intent,
    ignoreReason: acted ? null : event === 'issue' ? 'action_not_handled' : 'event_not_handled',
    workItemId,
    eventId: null,
    projectId: idOf(data.project) ?? idOf(data.project_id),
    workspaceId: idOf(body.workspace_id) ?? idOf(data.workspace),
    actorId: actor ?? fallbackActor,
    data,
  };
}

function parseV2(body: Record<string, unknown>, event: string, data: Record<string, unknown>): Draft {
  // A string, never an expanded `{id}`: it becomes the dedupe key as it is.
  const eventId = text(body.event_id, MAX_ID);
  if (eventId === null) throw bad(`event_id is required in a v2 payload (a string of at most ${MAX_ID} characters)`);
  const workItemId = required(data.id ?? body.entity_id, 'data.id');
  const acted = V2_EVENTS.get(event);
  const action = event.includes('.') ? event.slice(event.lastIndexOf('.') + 1) : null;
  const actorId = event.endsWith('.created')
    ? idOf(data.created_by_id)
    : (idOf(data.updated_by_id) ?? idOf(data.created_by_id));
  return {
    version: 'v2',
    event,
    action,
    intent: acted ?? 'none',
    ignoreReason: acted ? null : 'event_not_handled',
    workItemId,
    eventId,
    projectId: idOf(data.project_id) ?? idOf(data.project),
    workspaceId: idOf(body.workspace_id) ?? idOf(data.workspace_id),
    actorId,
    data,
  };
}

type Draft = Omit<PlaneEvent, 'title' | 'description' | 'url' | 'metadata'> & { data: Record<string, unknown> };

function toEvent({ data, ...e }: Draft): PlaneEvent {
  if (e.intent === 'upsert' && e.projectId === null) throw bad('data.project is required for a work-item event');
  const state = isObject(data.state)
    ? { id: idOf(data.state.id), name: text(data.state.name, MAX_ID), group: text(data.state.group, MAX_ID) }
    : null;
  const updatedAt = text(data.updated_at, MAX_ID);
  const name = text(data.name);
  let description: string | undefined;
  return {
    ...e,
    title: name === null ? `Plane work item ${e.workItemId}` : clip(name, MAX_TITLE),
    // Only a delivery that creates a task needs it, and HTML to text is the dearest part of the
    // parse: a retry (most deliveries) never pays for it.
    get description(): string {
      return (description ??= descriptionText(data));
    },
    url: text(data.url, MAX_URL),
    metadata: {
      workspaceId: e.workspaceId,
      projectId: e.projectId,
      sequenceId: Number.isSafeInteger(data.sequence_id) ? data.sequence_id : null,
      priority: text(data.priority, MAX_ID),
      state,
      updatedAt:
        updatedAt !== null && ISO_TIMESTAMP.test(updatedAt) && !Number.isNaN(Date.parse(updatedAt)) ? updatedAt : null,
    },
  };
}

/** The authoring run's requirement: the work item's name and description as text. */
export function requirementOf(e: Pick<PlaneEvent, 'title' | 'description'>): string {
  return e.description ? `${e.title}\n\n${e.description}` : e.title;
}
