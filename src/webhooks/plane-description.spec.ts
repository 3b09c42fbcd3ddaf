import {
  clip,
  descriptionText,
  MAX_DESCRIPTION_CHARS,
  MAX_DESCRIPTION_HTML_CHARS,
  TRUNCATED,
} from './plane-description';

describe('descriptionText limits', () => {
  it('converts at most MAX_DESCRIPTION_HTML_CHARS of HTML and says it cut', () => {
    const html = `<p>${'a'.repeat(MAX_DESCRIPTION_HTML_CHARS)}</p><p>tail</p>`;
    const text = descriptionText({ description_html: html });
    expect(text.endsWith(TRUNCATED)).toBe(true);
    expect(text).not.toContain('tail');
    expect(text.length).toBeLessThanOrEqual(MAX_DESCRIPTION_CHARS + TRUNCATED.length);
  });

  it('caps stripped text and ProseMirror text too', () => {
    const long = 'b'.repeat(MAX_DESCRIPTION_CHARS + 10);
    expect(descriptionText({ description_stripped: long })).toBe('b'.repeat(MAX_DESCRIPTION_CHARS) + TRUNCATED);
    const doc = { type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: long }] }] };
    expect(descriptionText({ description: doc })).toHaveLength(MAX_DESCRIPTION_CHARS + TRUNCATED.length);
  });

  it('never cuts a surrogate pair in half', () => {
    expect(clip('ab😀', 3)).toBe('ab');
    expect(clip('ab😀', 4)).toBe('ab😀');
    expect(clip('abc', 2, '…')).toBe('ab…');
  });

  it('ignores a ProseMirror node type that is not a string (no String() of an object with own toString)', () => {
    const doc = {
      type: 'doc',
      content: [{ type: { toString: 1, valueOf: 1 }, content: [{ type: 'text', text: 'x' }] }],
    };
    expect(descriptionText({ description: doc })).toBe('x');
  });
});
