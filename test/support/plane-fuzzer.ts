import { randomBytes } from 'node:crypto';
import { pythonJsonDumps } from './plane';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Obj = { [key: string]: Json };

/** mulberry32: small, seedable, good enough to pick mutations. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PROTO_NAMES = [
  'constructor',
  '__proto__',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'isPrototypeOf',
  '__defineGetter__',
  'toLocaleString',
];
const DEEP = '"@@deep@@"';

/** Defines, never assigns: `obj.__proto__ = x` would set a prototype instead of adding a key. */
function put(obj: Obj, key: string, value: Json): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

interface Case {
  name: string;
  body: Buffer;
  contentType: string | null;
}

/**
 * Bodies that must never create anything: a plausible Plane body (v1 or v2), some noise that
 * does not matter (huge strings, odd types and prototype names in fields we do not need), then ONE
 * defect that must stop it (a name Object.prototype also has, NUL, a lone surrogate, absurd
 * nesting, a missing or mistyped field, broken JSON, the wrong content type, no body, too big).
 */
export class Fuzzer {
  readonly ids: string[] = [];
  constructor(private readonly rand: () => number) {}

  private int(n: number): number {
    return Math.floor(this.rand() * n);
  }
  private pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  private uuid(): string {
    const hex = Array.from({ length: 32 }, () => this.int(16).toString(16)).join('');
    const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
    this.ids.push(id);
    return id;
  }
  private junk(): Json {
    return this.pick<() => Json>([
      () => null,
      () => this.int(2) === 1,
      () => this.int(1e9) - 5e8,
      () => 1e300,
      () => [],
      () => ({}),
      () => 'x'.repeat(this.int(300)),
      () => [1, 'a', null, { b: [] }],
      () => ({ id: this.int(5) }),
      () => '😀 Zoë “q”',
    ])();
  }

  private base(): { body: Obj; v2: boolean } {
    const v2 = this.int(3) === 0;
    const item = this.uuid();
    const project = this.uuid();
    if (v2) {
      return {
        v2,
        body: {
          version: 'v2',
          delivery_id: this.uuid(),
          event_id: this.uuid(),
          entity_id: item,
          entity_type: 'workitem',
          event: this.pick(['workitem.created', 'workitem.updated']),
          workspace_id: this.uuid(),
          data: {
            id: item,
            name: 'Fuzzed item',
            project_id: project,
            created_by_id: this.uuid(),
            updated_at: '2026-11-02T09:00:00Z',
          },
          previous_attributes: {},
        },
      };
    }
    return {
      v2,
      body: {
        event: 'issue',
        action: this.pick(['created', 'updated']),
        webhook_id: this.uuid(),
        workspace_id: this.uuid(),
        data: {
          id: item,
          name: 'Fuzzed item',
          project,
          workspace: this.uuid(),
          description_html: '<p>x</p>',
          updated_at: '2026-11-02T09:00:00.000000Z',
        },
        activity: { field: null, actor: { id: this.uuid() } },
      },
    };
  }

  /** Changes nothing the intake needs: never event, action, ids, project or version. */
  private noise(body: Obj): void {
    const data = body.data as Obj;
    const n = this.int(4);
    for (let i = 0; i < n; i++) {
      this.pick<() => void>([
        () => (data.name = 'n'.repeat(50_000 + this.int(400_000))),
        () => (data.description_html = '<'.repeat(50_000 + this.int(200_000))),
        () => (data.description_html = '<b>'.repeat(20_000 + this.int(60_000))),
        () => (data.name = this.junk()),
        () => (data.state = this.junk()),
        () => (data.labels = this.junk()),
        () => (data.sequence_id = this.junk()),
        () => (data.updated_at = this.pick(['yesterday', '-271821-04-20T00:00:00Z', '2026-13-45T99:99:99Z', ''])),
        () => put(data, this.pick(PROTO_NAMES), this.junk()),
        () => put(body, this.pick(PROTO_NAMES), { event: 'issue', action: 'created' }),
        () => (body.activity = this.junk()),
      ])();
    }
  }

  /** Every string position (values and keys) of an object, for NUL / surrogate insertion. */
  private spots(root: Obj): Array<{ set: (s: string) => void; get: () => string }> {
    const out: Array<{ set: (s: string) => void; get: () => string }> = [];
    const stack: Json[] = [root];
    while (stack.length) {
      const v = stack.pop()!;
      if (v === null || typeof v !== 'object') continue;
      if (Array.isArray(v)) {
        v.forEach((x, i) =>
          typeof x === 'string' ? out.push({ get: () => v[i] as string, set: (s) => (v[i] = s) }) : stack.push(x),
        );
        continue;
      }
      for (const k of Object.keys(v)) {
        const x = v[k];
        if (typeof x === 'string') out.push({ get: () => v[k] as string, set: (s) => (v[k] = s) });
        else stack.push(x);
        out.push({
          get: () => k,
          set: (s) => {
            const value = v[k];
            delete v[k];
            put(v, s, value);
          },
        });
      }
    }
    return out;
  }

  private inject(body: Obj, what: string): void {
    const spot = this.pick(this.spots(body));
    const s = spot.get();
    const at = this.int(s.length + 1);
    spot.set(s.slice(0, at) + what + s.slice(at));
  }

  next(i: number): Case {
    const { body, v2 } = this.base();
    this.noise(body);
    const data = body.data as Obj;
    let contentType: string | null = 'application/json';
    let text: string | null = null;
    let bytes: Buffer | null = null;
    const fatal = this.pick<[string, () => void]>([
      [
        'proto action',
        () =>
          v2
            ? (body.event = this.pick([...PROTO_NAMES, ...PROTO_NAMES.map((p) => `workitem.${p}`)]))
            : (body.action = this.pick(PROTO_NAMES)),
      ],
      [
        'unknown event',
        () => (body.event = this.pick([...PROTO_NAMES, 'cycle', 'issue_comment', 'project', `x${this.int(1e6)}`])),
      ],
      ['NUL', () => this.inject(body, '\u0000')],
      ['lone surrogate', () => this.inject(body, this.pick(['\ud800', '\udfff', '\udbff', '\udc00']))],
      ['deep nesting', () => (data.deep = '@@deep@@')],
      [
        'bad data.id',
        () => (
          (data.id = this.pick<Json>([null, 42, [], {}, '', 'None', 'i'.repeat(300), { id: null }])),
          delete body.entity_id
        ),
      ],
      [
        'bad event',
        () =>
          this.int(2)
            ? delete body.event
            : (body.event = this.pick<Json>([null, 7, [], {}, '', 'None', 'e'.repeat(300)])),
      ],
      [
        'bad action',
        () =>
          v2
            ? delete body.event_id
            : this.int(2)
              ? delete body.action
              : (body.action = this.pick<Json>([null, 1, ['created'], {}, ''])),
      ],
      ['bad data', () => (body.data = this.pick<Json>([null, 'data', [data], 3, true]))],
      ['no project', () => (v2 ? delete data.project_id : delete data.project)],
      [
        'bad event_id',
        () => ((body.version = 'v2'), (body.event_id = this.pick<Json>([null, { id: 'e' }, 5, ['e'], '', 'None']))),
      ],
      ['not an object', () => (text = this.pick(['[]', '[{"event": "issue"}]', '42', '"issue"', 'null', 'true']))],
      ['broken JSON', () => (text = this.brokenJson(body))],
      [
        'not JSON',
        () =>
          this.int(4)
            ? (text = this.pick(['hello', '<xml/>', 'event=issue&action=created']))
            : (bytes = randomBytes(64)),
      ],
      ['empty', () => (text = '')],
      [
        'wrong content type',
        () =>
          (contentType = this.pick([
            null,
            'text/plain',
            'application/x-www-form-urlencoded',
            'multipart/form-data; boundary=x',
            'application/json; charset=utf-16',
          ])),
      ],
      ['too big', () => (data.pad = 'p'.repeat(1024 * 1024 + this.int(1000)))],
      // JSON.parse keeps the last of two equal keys.
      [
        'duplicate key',
        () =>
          (text = `${pythonJsonDumps(body).slice(0, -1)}, "action": "${this.pick(PROTO_NAMES)}", "event": "${v2 ? 'constructor' : 'issue'}"}`),
      ],
    ]);
    fatal[1]();
    let raw = text ?? pythonJsonDumps(body);
    if (fatal[0] === 'deep nesting') {
      const depth = 129 + this.int(this.int(2) ? 200 : 200_000);
      raw = raw.replace(
        DEEP,
        this.int(2) ? '['.repeat(depth) + ']'.repeat(depth) : '{"a": '.repeat(depth) + '1' + '}'.repeat(depth),
      );
    }
    return { name: `#${i} ${fatal[0]}${v2 ? ' (v2)' : ''}`, body: bytes ?? Buffer.from(raw, 'utf8'), contentType };
  }

  private brokenJson(body: Obj): string {
    const s = pythonJsonDumps(body);
    return this.pick([
      () => s.slice(0, this.int(s.length - 1)),
      () => `${s}}`,
      () => s.replace(/"/, "'"),
      () => s.replace(':', ''),
      () => `${s} trailing`,
      () => s.replace(/, "/, ',, "'),
    ])();
  }
}
