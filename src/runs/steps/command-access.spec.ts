import { REDACTED_CREDENTIAL, redactCredential } from './command-access';

describe('redactCredential', () => {
  const token = 'ofr_0123456789abcdefghijABCDEFGHIJ_-xyz';

  it('replaces every occurrence of the credential', () => {
    const text = `ONCEFLOW_RUN_TOKEN=${token}\nOPENAI_BASE_URL=http://127.0.0.1:9/llm/${token}/openai\n`;
    const out = redactCredential(text, token);
    expect(out).not.toContain(token);
    expect(out.split(REDACTED_CREDENTIAL)).toHaveLength(3);
    expect(out).toContain('/llm/[onceflow credential redacted]/openai');
  });

  it('replaces the end of a credential the tail cut at its start', () => {
    const out = redactCredential(`${token.slice(12)}\ndone\n`, token);
    expect(out).toBe(`${REDACTED_CREDENTIAL}\ndone\n`);
  });

  it('leaves text without the credential alone (a short common suffix is not a credential)', () => {
    expect(redactCredential('xyz and more\n', token)).toBe('xyz and more\n');
    expect(redactCredential('', token)).toBe('');
  });
});
