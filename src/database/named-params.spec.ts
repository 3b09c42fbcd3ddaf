import { bindNamed, mergeValues } from './named-params';

describe('bindNamed', () => {
  it('numbers placeholders in order of first use and reuses a number for a repeated name', () => {
    expect(bindNamed('SELECT :b, :a, :b', { a: 1, b: 2 })).toEqual({ text: 'SELECT $1, $2, $1', values: [2, 1] });
  });

  it('leaves ::type casts alone', () => {
    expect(bindNamed('SELECT :token::bigint, now()::text', { token: '7' })).toEqual({
      text: 'SELECT $1::bigint, now()::text',
      values: ['7'],
    });
  });

  it('refuses a placeholder without a value and a value without a placeholder', () => {
    expect(() => bindNamed('SELECT :a', {})).toThrow('no value for :a');
    expect(() => bindNamed('SELECT :a', { a: 1, b: 2 })).toThrow('unused values b');
  });

  it('binds null and undefined values as given', () => {
    expect(bindNamed('SELECT :a, :b', { a: null, b: undefined }).values).toEqual([null, undefined]);
  });
});

describe('mergeValues', () => {
  it('refuses a name given twice', () => {
    expect(mergeValues({ a: 1 }, undefined, { b: 2 })).toEqual({ a: 1, b: 2 });
    expect(() => mergeValues({ a: 1 }, { a: 2 })).toThrow(':a given twice');
  });
});
