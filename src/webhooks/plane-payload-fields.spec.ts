import { createHash } from 'node:crypto';
import { descriptionText } from './plane-description';
import { parsePlaneEvent, planeDedupeKey, planeVersion, requirementOf } from './plane-payload';
import { WebhooksErrorCode } from './webhooks.errors';

/**
 * Field by field: which part of a Plane body each PlaneEvent field comes from, and what is
 * refused. Written against surviving mutants (docs/mutation.md); plane-payload.spec.ts has the tour.
 */
const ID = '5f0c7a52-2a43-4a4e-9d2b-5b1bb1a7e001';
const PROJECT = '0c8f0e4d-7e0f-4b5a-8d51-3d7f3f0f0002';
const WS = 'a1b2c3d4-0000-4000-8000-000000000003';
const CREATOR = 'c0c0c0c0-0000-4000-8000-000000000005';
const UPDATER = 'd0d0d0d0-0000-4000-8000-000000000006';

const v1 = (over: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
  event: 'issue',
  action: 'created',
  workspace_id: WS,
  data: { id: ID, name: 'Add health', project: PROJECT, created_by: CREATOR, updated_by: UPDATER, ...data },
  activity: {},
  ...over,
});
const v2 = (over: Record<string, unknown> = {}, data: Record<string, unknown> = {}) => ({
  event_id: 'ev-1',
  event: 'workitem.created',
  workspace_id: WS,
  data: { id: ID, name: 'Add health', project_id: PROJECT, created_by_id: CREATOR, updated_by_id: UPDATER, ...data },
  ...over,
});
const rejects = (body: unknown, message: RegExp) =>
  expect(() => parsePlaneEvent(body)).toThrow(
    expect.objectContaining({ code: WebhooksErrorCode.INVALID_PAYLOAD, message: expect.stringMatching(message) }),
  );

describe('Plane payload: what is refused, and why', () => {
  it.each([
    ['null', null, /JSON object/],
    ['an array', [v1()], /JSON object/],
    ['a blank event', v1({ event: '   ' }), /event is required/],
    ['data null', v1({ data: null }), /data must be an object/],
    ['data an array', v1({ data: [ID] }), /data must be an object/],
    ['a blank action', v1({ action: ' ' }), /action is required/],
    ['data.id not a string', v1({}, { id: 42 }), /data\.id is required/],
    ['an upsert without project', v1({}, { project: 'None' }), /data\.project is required/],
    ['a v2 event_id "None"', v2({ event_id: 'None' }), /event_id is required/],
    ['a v2 item without any id', v2({}, { id: undefined }), /data\.id is required/],
  ])('refuses %s', (_name, body, message) => rejects(body, message));

  it('takes ids of up to 255 characters, and an expanded {id} object', () => {
    const long = 'x'.repeat(255);
    expect(parsePlaneEvent(v1({}, { id: long })).workItemId).toBe(long);
    expect(parsePlaneEvent(v1({}, { id: ` ${ID} ` })).workItemId).toBe(ID);
    expect(parsePlaneEvent(v1({}, { project: { id: PROJECT, name: 'P' } })).projectId).toBe(PROJECT);
    expect(parsePlaneEvent(v1({}, { project: { id: 'x'.repeat(256) }, project_id: 'fallback' })).projectId).toBe(
      'fallback',
    );
  });
});

describe('Plane payload: version and dedupe key', () => {
  it('is v2 when any of event_id, version or a dotted event is there', () => {
    expect(planeVersion({ event: 'issue' })).toBe('v1');
    expect(planeVersion({ event: 42 })).toBe('v1');
    expect(planeVersion({ event: 'issue', event_id: 'e' })).toBe('v2');
    expect(planeVersion({ event: 'issue', version: 'v2' })).toBe('v2');
    expect(planeVersion({ event: 'workitem.created' })).toBe('v2');
  });

  it('keys v1 by the sha256 of the raw bytes and v2 by event_id', () => {
    const raw = Buffer.from('{"event": "issue"}');
    expect(planeDedupeKey({ version: 'v1', eventId: 'ignored' }, raw)).toBe(
      `sha256:${createHash('sha256').update(raw).digest('hex')}`,
    );
    expect(planeDedupeKey({ version: 'v2', eventId: 'ev-9' }, raw)).toBe('event:ev-9');
  });
});

describe('Plane payload: v1 fields', () => {
  it('an issue action it does not handle is "action_not_handled"; another event is "event_not_handled"', () => {
    expect(parsePlaneEvent(v1({ action: 'restored' }))).toMatchObject({
      intent: 'none',
      ignoreReason: 'action_not_handled',
      action: 'restored',
    });
    expect(parsePlaneEvent(v1({ event: 'cycle' }))).toMatchObject({
      intent: 'none',
      ignoreReason: 'event_not_handled',
    });
    expect(parsePlaneEvent(v1({ event: 'cycle', action: 'deleted' })).intent).toBe('none');
    expect(parsePlaneEvent(v1({ action: 'delete' }))).toMatchObject({ intent: 'close', ignoreReason: null });
  });

  it('takes the actor from activity.actor.id, else the creator of a create and the updater of anything else', () => {
    expect(parsePlaneEvent(v1({ activity: { actor: { id: 'a1' } } })).actorId).toBe('a1');
    expect(parsePlaneEvent(v1({ activity: { actor: 'a1' } })).actorId).toBe(CREATOR);
    expect(parsePlaneEvent(v1({ activity: 'x' })).actorId).toBe(CREATOR);
    expect(parsePlaneEvent(v1({ action: 'create' })).actorId).toBe(CREATOR);
    expect(parsePlaneEvent(v1({ action: 'updated' })).actorId).toBe(UPDATER);
    expect(parsePlaneEvent(v1({ action: 'deleted' })).actorId).toBe(UPDATER);
  });

  it('falls back to data.project_id and data.workspace', () => {
    const e = parsePlaneEvent(
      v1({ workspace_id: undefined }, { project: undefined, project_id: PROJECT, workspace: 'ws-2' }),
    );
    expect(e).toMatchObject({ projectId: PROJECT, workspaceId: 'ws-2' });
    expect(parsePlaneEvent(v1({}, { workspace: 'ws-2' })).workspaceId).toBe(WS);
  });
});

describe('Plane payload: v2 fields', () => {
  it('reads the action after the last dot, and none from an undotted event', () => {
    expect(parsePlaneEvent(v2({ event: 'workitem.comment.created' }))).toMatchObject({
      action: 'created',
      intent: 'none',
      ignoreReason: 'event_not_handled',
    });
    expect(parsePlaneEvent(v2({ event: 'ping' }))).toMatchObject({ action: null, intent: 'none' });
    expect(parsePlaneEvent(v2({ event: 'workitem.updated' }))).toMatchObject({
      action: 'updated',
      intent: 'upsert',
      ignoreReason: null,
    });
  });

  it('the actor of a create is its creator; of an update the updater, else the creator', () => {
    expect(parsePlaneEvent(v2()).actorId).toBe(CREATOR);
    expect(parsePlaneEvent(v2({ event: 'workitem.updated' })).actorId).toBe(UPDATER);
    expect(parsePlaneEvent(v2({ event: 'workitem.updated' }, { updated_by_id: 'None' })).actorId).toBe(CREATOR);
  });

  it('falls back to data.project and data.workspace_id, and takes the id from entity_id', () => {
    const e = parsePlaneEvent(
      v2(
        { workspace_id: undefined, entity_id: 'ent-1' },
        { id: undefined, project_id: undefined, project: PROJECT, workspace_id: 'ws-3' },
      ),
    );
    expect(e).toMatchObject({ workItemId: 'ent-1', projectId: PROJECT, workspaceId: 'ws-3' });
    expect(parsePlaneEvent(v2({}, { workspace_id: 'ws-3' })).workspaceId).toBe(WS);
  });
});

describe('Plane payload: title, url and metadata', () => {
  it('trims the title, names an untitled item, and cuts at 1000 characters', () => {
    expect(parsePlaneEvent(v1({}, { name: '  Spaced  ' })).title).toBe('Spaced');
    expect(parsePlaneEvent(v1({}, { name: 'None' })).title).toBe(`Plane work item ${ID}`);
    expect(parsePlaneEvent(v1({}, { name: 'n'.repeat(1500) })).title).toBe('n'.repeat(1000));
  });

  it('keeps url, sequence id, priority, state and a parseable updated_at; "None" and junk become null', () => {
    const full = parsePlaneEvent(
      v1(
        {},
        {
          url: 'https://plane.example/i/1',
          sequence_id: 42,
          priority: 'high',
          state: { id: 's1', name: 'Todo', group: 'unstarted' },
          updated_at: '2026-11-02T09:00:00Z',
        },
      ),
    );
    expect(full.url).toBe('https://plane.example/i/1');
    expect(full.metadata).toEqual({
      workspaceId: WS,
      projectId: PROJECT,
      sequenceId: 42,
      priority: 'high',
      state: { id: 's1', name: 'Todo', group: 'unstarted' },
      updatedAt: '2026-11-02T09:00:00Z',
    });
    const bare = parsePlaneEvent(
      v1({}, { url: 'None', sequence_id: '42', priority: 'None', state: 's1', updated_at: 'yesterday' }),
    );
    expect(bare.url).toBeNull();
    expect(bare.metadata).toEqual({
      workspaceId: WS,
      projectId: PROJECT,
      sequenceId: null,
      priority: null,
      state: null,
      updatedAt: null,
    });
  });
});

describe('descriptionText', () => {
  it('turns blocks into paragraphs and list items into lines, drops tags, decodes entities once and squeezes blank lines', () => {
    const html =
      '<h2>Title</h2><p>a&nbsp;&lt;b&gt; &quot;c&quot; &#39;d&#39; &amp;lt;</p><ul><li>x</li><li>y</li></ul><div>z</div>one<br>two<br/>three<BR />four<p></p><p></p><p></p><p>end</p>';
    expect(descriptionText({ description_html: html })).toBe(
      'Title\n\na\u00a0<b> "c" \'d\' &lt;\n\n- x\n- y\n\nz\none\ntwo\nthree\nfour\n\nend',
    );
    expect(descriptionText({ description_stripped: 'None', description_html: '<p>html</p>' })).toBe('html');
  });

  it('reads a plain string description, and "None" as empty', () => {
    expect(descriptionText({ description: '  plain  ' })).toBe('plain');
    expect(descriptionText({ description: 'None' })).toBe('');
    expect(descriptionText({ description: 42 })).toBe('');
  });

  it('ends each ProseMirror block with a line break, not inline nodes, and stops at depth 50', () => {
    const t = (text: string) => ({ type: 'text', text });
    const doc = {
      type: 'doc',
      content: [
        { type: 'heading', content: [t('H')] },
        { type: 'blockquote', content: [t('q')] },
        { type: 'codeBlock', content: [t('c')] },
        {
          type: 'bulletList',
          content: [{ type: 'listItem', content: [t('i'), { type: 'hardBreak' }, 'junk', null, t('j')] }],
        },
        { type: 'paragraph', content: [t('a'), { type: 'mention', content: [t('@b')] }] },
      ],
    };
    expect(descriptionText({ description: doc })).toBe('H\nq\nc\nij\na@b');
    let deep: Record<string, unknown> = t('deep');
    for (let i = 0; i < 49; i++) deep = { type: 'mention', content: [deep] };
    expect(descriptionText({ description: { type: 'doc', content: [deep, t('!')] } })).toBe('deep!');
    expect(
      descriptionText({ description: { type: 'doc', content: [{ type: 'mention', content: [deep] }, t('!')] } }),
    ).toBe('!');
  });

  it('requirementOf joins title and description, or is the title alone', () => {
    expect(requirementOf({ title: 'T', description: 'D' })).toBe('T\n\nD');
    expect(requirementOf({ title: 'T', description: '' })).toBe('T');
  });
});
