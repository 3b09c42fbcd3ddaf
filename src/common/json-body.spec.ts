import { jsonDepthExceeds } from './json-body';

const bytes = (s: string) => Buffer.from(s, 'utf8');

describe('jsonDepthExceeds', () => {
  it('counts the nesting of arrays and objects', () => {
    expect(jsonDepthExceeds(bytes('{"a": [1, {"b": []}]}'), 4)).toBe(false);
    expect(jsonDepthExceeds(bytes('{"a": [1, {"b": [[]]}]}'), 4)).toBe(true);
    expect(jsonDepthExceeds(bytes('[[], [], []]'), 2)).toBe(false);
    expect(jsonDepthExceeds(bytes('1'), 0)).toBe(false);
  });

  it('skips brackets inside strings, escaped quotes included', () => {
    expect(jsonDepthExceeds(bytes('{"a": "[[[[[[{{{{"}'), 1)).toBe(false);
    expect(jsonDepthExceeds(bytes('{"a": "\\"[[[[", "b": "\\\\"}'), 1)).toBe(false);
    expect(jsonDepthExceeds(bytes('{"a": "\\\\", "b": [[]]}'), 2)).toBe(true);
    expect(jsonDepthExceeds(bytes('["ünï[cödé"]'), 1)).toBe(false);
  });

  it('scans a megabyte of brackets at once', () => {
    expect(jsonDepthExceeds(bytes('['.repeat(1 << 20)), 128)).toBe(true);
    expect(jsonDepthExceeds(bytes('[]'.repeat(1 << 19)), 1)).toBe(false);
  });
});
