import { canonicalJson, requestKey } from './request-key';

describe('LLM cache request key', () => {
  const body = (o: unknown) => Buffer.from(JSON.stringify(o));

  it('is the same for bodies that differ only in key order or whitespace', () => {
    const a = requestKey(
      'openai',
      '/chat/completions',
      Buffer.from('{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1}'),
    );
    const b = requestKey(
      'openai',
      '/chat/completions',
      Buffer.from('{ "n": 1, "messages": [ {"content": "hi", "role": "user"} ], "model": "m" }'),
    );
    expect(a?.hash).toBe(b?.hash);
  });

  it('differs by provider, path, array order and any value', () => {
    const base = {
      model: 'm',
      messages: [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ],
    };
    const k = requestKey('openai', '/chat/completions', body(base))!.hash;
    expect(requestKey('anthropic', '/chat/completions', body(base))!.hash).not.toBe(k);
    expect(requestKey('openai', '/responses', body(base))!.hash).not.toBe(k);
    expect(
      requestKey('openai', '/chat/completions', body({ ...base, messages: [...base.messages].reverse() }))!.hash,
    ).not.toBe(k);
    expect(requestKey('openai', '/chat/completions', body({ ...base, model: 'm2' }))!.hash).not.toBe(k);
    expect(requestKey('openai', '/chat/completions', body({ ...base, temperature: 0 }))!.hash).not.toBe(k);
  });

  it('tells a streamed request apart, and refuses what is not JSON', () => {
    expect(requestKey('openai', '/x', body({ stream: true }))?.stream).toBe(true);
    expect(requestKey('openai', '/x', body({ stream: 'true' }))?.stream).toBe(false);
    expect(requestKey('openai', '/x', Buffer.from('not json'))).toBeUndefined();
    expect(requestKey('openai', '/x', Buffer.from('['.repeat(200_000) + ']'.repeat(200_000)))).toBeUndefined();
  });

  it('prints keys sorted at every level, arrays in order', () => {
    expect(canonicalJson({ b: [{ d: 1, c: 2 }], a: null })).toBe('{"a":null,"b":[{"c":2,"d":1}]}');
  });
});
