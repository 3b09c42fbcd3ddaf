import { canonicalJson, fingerprint } from './idempotency.service';

describe('canonicalJson and fingerprint (what makes two requests "the same")', () => {
  it('sorts keys at every depth, drops undefined members, keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, 1], c: 'x' }, u: undefined })).toBe('{"a":{"c":"x","d":[2,1]},"b":1}');
    expect(canonicalJson([{ b: 1, a: 2 }, null, 'q"'])).toBe('[{"a":2,"b":1},null,"q\\""]');
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson(0)).toBe('0');
    expect(canonicalJson('')).toBe('""');
    expect(canonicalJson({})).toBe('{}');
  });

  it('is the sha256 of method, route and canonical body', () => {
    const a = fingerprint('POST', '/api/projects/:id/runs', { requirement: 'x', dispatch: true });
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(fingerprint('POST', '/api/projects/:id/runs', { dispatch: true, requirement: 'x' })).toBe(a);
    expect(fingerprint('PUT', '/api/projects/:id/runs', { requirement: 'x', dispatch: true })).not.toBe(a);
    expect(fingerprint('POST', '/api/other', { requirement: 'x', dispatch: true })).not.toBe(a);
    expect(fingerprint('POST', '/api/projects/:id/runs', { requirement: 'y', dispatch: true })).not.toBe(a);
    // sha256 of the text "POST /a", a line break, "{}"
    expect(fingerprint('POST', '/a', {})).toBe('5b1b6a6b5642a1f49ea284d89b3f69e3bb4a44148363dff37d68b2c1d7f7bb08');
  });
});
