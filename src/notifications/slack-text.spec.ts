import { escapeSlackText } from './slack-text';

describe('escapeSlackText', () => {
  it.each([
    ['<!channel> deploy now', '&lt;!channel&gt; deploy now'],
    ['<!here>', '&lt;!here&gt;'],
    ['ping <@U123ABC>', 'ping &lt;@U123ABC&gt;'],
    ['<#C024BE7LR|general>', '&lt;#C024BE7LR|general&gt;'],
    ['see <http://evil.example|the docs>', 'see &lt;http://evil.example|the docs&gt;'],
    ['<!subteam^S123>', '&lt;!subteam^S123&gt;'],
  ])('makes %j inert', (input, escaped) => {
    expect(escapeSlackText(input)).toBe(escaped);
  });

  it('escapes & first, so an entity in the input is shown as typed, not decoded', () => {
    expect(escapeSlackText('a &lt;b&gt; & c')).toBe('a &amp;lt;b&amp;gt; &amp; c');
  });

  it('leaves everything else as it is', () => {
    const plain = 'Add a health endpoint: *bold* _it_ `code` "quotes" \'apos\' é 漢字 :tada:';
    expect(escapeSlackText(plain)).toBe(plain);
  });
});
