import { jsonStorageProblem, storableCopy, storableText } from './storable-json';

const nested = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
};

describe('jsonStorageProblem', () => {
  it('finds NUL and lone surrogates in values and keys, anywhere', () => {
    expect(jsonStorageProblem({ a: [1, { b: 'ok 😀' }] }, 10)).toBeNull();
    expect(jsonStorageProblem({ a: [1, { b: 'x\u0000y' }] }, 10)).toBe('nul_character');
    expect(jsonStorageProblem({ a: { 'k\u0000': 1 } }, 10)).toBe('nul_character');
    expect(jsonStorageProblem(['\ud800'], 10)).toBe('lone_surrogate');
    expect(jsonStorageProblem(['a\udfff'], 10)).toBe('lone_surrogate');
    expect(jsonStorageProblem({ '\udc00x': 1 }, 10)).toBe('lone_surrogate');
    expect(jsonStorageProblem('\u0000', 10)).toBe('nul_character');
  });

  it('counts a container as its own level, like brackets do, and reports depth before characters', () => {
    expect(jsonStorageProblem(nested(10), 10)).toBeNull();
    expect(jsonStorageProblem(nested(11), 10)).toBe('too_deep');
    expect(jsonStorageProblem({ a: '\u0000', b: nested(20) }, 10)).toBe('too_deep');
  });

  it('walks 100,000 levels without a stack overflow', () => {
    expect(jsonStorageProblem(nested(100_000), 128)).toBe('too_deep');
    expect(jsonStorageProblem(nested(100_000), 200_000)).toBeNull();
  });
});

describe('storableCopy', () => {
  it('replaces NUL and lone surrogates with U+FFFD in values and keys, keeping pairs and structure', () => {
    const copy = storableCopy({ t: 'a\u0000b', s: ['\ud800', '😀'], 'k\u0000': { n: 1, z: null, b: true } });
    expect(copy).toEqual({ t: 'a\ufffdb', s: ['\ufffd', '😀'], 'k\ufffd': { n: 1, z: null, b: true } });
    expect(jsonStorageProblem(copy, 10)).toBeNull();
    expect(storableText('x\udfffy\u0000')).toBe('x\ufffdy\ufffd');
  });

  it('keeps __proto__ a plain own key (no prototype is set) and copies deep values without recursion', () => {
    const body = JSON.parse('{"__proto__": {"polluted": "\\u0000"}, "constructor": {"prototype": 1}}');
    const copy = storableCopy(body) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__', 'constructor']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"polluted":"\ufffd"},"constructor":{"prototype":1}}');
    expect(jsonStorageProblem(storableCopy(nested(50_000)), 60_000)).toBeNull();
  });
});
