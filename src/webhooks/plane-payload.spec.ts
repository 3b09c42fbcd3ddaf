import { descriptionText } from './plane-description';
import { parsePlaneEvent, planeDedupeKey, requirementOf } from './plane-payload';
import { WebhooksErrorCode } from './webhooks.errors';

const ID = '5f0c7a52-2a43-4a4e-9d2b-5b1bb1a7e001';
const PROJECT = '0c8f0e4d-7e0f-4b5a-8d51-3d7f3f0f0002';
const WS = 'a1b2c3d4-0000-4000-8000-000000000003';
const ACTOR = 'b0b0b0b0-0000-4000-8000-000000000004';

const v1 = (over: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
  event: 'issue',
  action: 'created',
  webhook_id: 'w',
  workspace_id: WS,
  data: {
    id: ID,
    name: 'Add health',
    project: PROJECT,
    description_stripped: 'Expose it',
    updated_at: '2026-11-02T09:00:00Z',
    ...data,
  },
  activity: { actor: { id: ACTOR } },
  ...over,
});

describe('parsePlaneEvent (v1)', () => {
  it('reads a created work item', () => {
    const e = parsePlaneEvent(v1());
    expect(e).toMatchObject({
      version: 'v1',
      intent: 'upsert',
      workItemId: ID,
      projectId: PROJECT,
      workspaceId: WS,
      actorId: ACTOR,
      title: 'Add health',
    });
    expect(requirementOf(e)).toBe('Add health\n\nExpose it');
    expect(e.metadata).toMatchObject({ workspaceId: WS, updatedAt: '2026-11-02T09:00:00Z' });
  });

  it.each([
    ['created', 'upsert'],
    ['create', 'upsert'],
    ['updated', 'upsert'],
    ['update', 'upsert'],
    ['deleted', 'close'],
    ['archived', 'close'],
    ['restored', 'none'],
  ])('maps action %s to %s', (action, intent) => {
    expect(parsePlaneEvent(v1({ action })).intent).toBe(intent);
  });

  it('ignores other events, and a delete needs only data.id', () => {
    expect(parsePlaneEvent(v1({ event: 'project' }))).toMatchObject({
      intent: 'none',
      ignoreReason: 'event_not_handled',
    });
    expect(parsePlaneEvent({ event: 'issue', action: 'deleted', data: { id: ID }, activity: {} })).toMatchObject({
      intent: 'close',
      workItemId: ID,
    });
  });

  it.each([
    ['not an object', []],
    ['no event', { ...v1(), event: undefined }],
    ['no action', { ...v1(), action: null }],
    ['no data', { ...v1(), data: 'x' }],
    ['no data.id', v1({}, { id: undefined })],
    ['empty data.id', v1({}, { id: '  ' })],
    ['data.id "None"', v1({}, { id: 'None' })],
    ['an over-long data.id', v1({}, { id: 'x'.repeat(256) })],
    ['no project on a created item', v1({}, { project: undefined })],
  ])('rejects %s with a 400', (_name, body) => {
    expect(() => parsePlaneEvent(body)).toThrow(expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD }));
  });

  it('falls back to data.updated_by when there is no activity actor', () => {
    expect(parsePlaneEvent(v1({ action: 'updated', activity: {} }, { updated_by: ACTOR })).actorId).toBe(ACTOR);
  });
});

describe('parsePlaneEvent (v2)', () => {
  const v2 = (over: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
    version: 'v2',
    delivery_id: 'd1',
    event_id: 'ev-1',
    entity_id: ID,
    entity_type: 'workitem',
    event: 'workitem.created',
    workspace_id: WS,
    data: { id: ID, name: 'Add health', project_id: PROJECT, created_by_id: ACTOR, updated_by_id: 'None', ...data },
    ...over,
  });

  it('reads a created work item; "None" is null; the actor is the creator', () => {
    const e = parsePlaneEvent(v2());
    expect(e).toMatchObject({
      version: 'v2',
      intent: 'upsert',
      action: 'created',
      workItemId: ID,
      projectId: PROJECT,
      actorId: ACTOR,
    });
  });

  it('takes the updater as actor of an update, and maps deleted/archived to close', () => {
    expect(parsePlaneEvent(v2({ event: 'workitem.updated' }, { updated_by_id: 'u2' })).actorId).toBe('u2');
    expect(parsePlaneEvent(v2({ event: 'workitem.archived' })).intent).toBe('close');
    expect(parsePlaneEvent(v2({ event: 'workitem.deleted' })).intent).toBe('close');
    expect(parsePlaneEvent(v2({ event: 'project.created' })).intent).toBe('none');
  });

  it('needs event_id (its dedupe key); data.id may come from entity_id', () => {
    expect(() => parsePlaneEvent(v2({ event_id: 'None' }))).toThrow(
      expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD }),
    );
    expect(parsePlaneEvent(v2({}, { id: undefined })).workItemId).toBe(ID);
  });
});

describe('planeDedupeKey', () => {
  it('hashes v1 raw bytes (retries are byte-identical) and uses event_id for v2', () => {
    const a = planeDedupeKey({ version: 'v1', eventId: null }, Buffer.from('{"a": 1}'));
    expect(a).toBe(planeDedupeKey({ version: 'v1', eventId: null }, Buffer.from('{"a": 1}')));
    expect(a).not.toBe(planeDedupeKey({ version: 'v1', eventId: null }, Buffer.from('{"a":1}')));
    expect(planeDedupeKey({ version: 'v2', eventId: 'e' }, Buffer.from('x'))).toBe('event:e');
  });
});

describe('descriptionText', () => {
  it('prefers the stripped text, then HTML, then a ProseMirror document', () => {
    expect(descriptionText({ description_stripped: 'plain', description_html: '<p>x</p>' })).toBe('plain');
    expect(descriptionText({ description_html: '<p>a &amp; b</p><p>c</p>' })).toBe('a & b\n\nc');
    const doc = {
      type: 'doc',
      content: [
        { type: 'paragraph', content: [{ type: 'text', text: 'one' }] },
        { type: 'paragraph', content: [{ type: 'text', text: 'two' }] },
      ],
    };
    expect(descriptionText({ description: doc })).toBe('one\ntwo');
    expect(descriptionText({})).toBe('');
  });
});

describe('names that Object.prototype also has', () => {
  const PROTO_NAMES = [
    'constructor',
    '__proto__',
    'toString',
    'hasOwnProperty',
    'valueOf',
    'isPrototypeOf',
    '__defineGetter__',
  ];
  const base = {
    event: 'issue',
    action: 'created',
    workspace_id: WS,
    data: { id: ID, name: 'n', project: PROJECT },
    activity: {},
  };

  it.each(PROTO_NAMES)('v1 action %s is ignored, not acted on', (action) => {
    expect(parsePlaneEvent({ ...base, action })).toMatchObject({ intent: 'none', ignoreReason: 'action_not_handled' });
  });

  it.each(PROTO_NAMES)('v2 event %s, also after "workitem.", is ignored, not acted on', (name) => {
    const v2 = { version: 'v2', event_id: 'ev', data: { id: ID, project_id: PROJECT } };
    expect(parsePlaneEvent({ ...v2, event: name })).toMatchObject({
      intent: 'none',
      ignoreReason: 'event_not_handled',
    });
    expect(parsePlaneEvent({ ...v2, event: `workitem.${name}` })).toMatchObject({
      intent: 'none',
      ignoreReason: 'event_not_handled',
    });
  });

  it('reads __proto__ and constructor keys in the body as plain data', () => {
    const body = JSON.parse(
      `{"event": "issue", "action": "created", "__proto__": {"event": "x"}, "data": {"id": "${ID}", "project": "${PROJECT}", "constructor": 1, "__proto__": {"name": "evil"}}}`,
    );
    expect(parsePlaneEvent(body)).toMatchObject({ intent: 'upsert', event: 'issue', title: `Plane work item ${ID}` });
  });
});

describe('parsePlaneEvent on odd values', () => {
  it('takes a v2 event_id only as a string (an object would make every delivery share one dedupe key)', () => {
    const v2 = { version: 'v2', event: 'workitem.created', data: { id: ID, project_id: PROJECT } };
    expect(() => parsePlaneEvent({ ...v2, event_id: { id: 'a' } })).toThrow(
      expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD }),
    );
    expect(() => parsePlaneEvent({ ...v2, event_id: 'e'.repeat(256) })).toThrow(
      expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD }),
    );
    expect(planeDedupeKey(parsePlaneEvent({ ...v2, event_id: 'ev-7' }), Buffer.from(''))).toBe('event:ev-7');
  });

  it('refuses an over-long event or action, drops NUL from derived text, and keeps an updated_at only if Postgres can read it', () => {
    expect(() => parsePlaneEvent(v1({ event: 'i'.repeat(256) }))).toThrow(
      expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD }),
    );
    expect(() => parsePlaneEvent(v1({ action: 'a'.repeat(256) }))).toThrow(
      expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD }),
    );
    const e = parsePlaneEvent(v1({}, { name: 'a\u0000b\ud800', url: 'u'.repeat(3000), updated_at: 'Tue Nov 03 2026' }));
    expect(e.title).toBe('ab\ufffd');
    expect(e.url).toBeNull();
    expect(e.metadata.updatedAt).toBeNull();
    expect(parsePlaneEvent(v1({}, { sequence_id: 1e300 })).metadata.sequenceId).toBeNull();
  });

  it('turns an event into an ignored one when told why', () => {
    expect(parsePlaneEvent(v1(), 'unstorable_nul_character')).toMatchObject({
      intent: 'none',
      ignoreReason: 'unstorable_nul_character',
    });
    // Without a project a created item is a 400, unless it is ignored anyway.
    expect(parsePlaneEvent(v1({}, { project: undefined }), 'unstorable_lone_surrogate').intent).toBe('none');
  });
});
