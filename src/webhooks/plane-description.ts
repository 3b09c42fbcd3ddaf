import { compile } from 'html-to-text';

/**
 * Most of a description's HTML the intake converts. htmlparser2 (under html-to-text) parses in
 * time quadratic in the nesting of unclosed tags: a megabyte of them would block the process for
 * long; this much converts quickly whatever it holds (test: webhooks-input).
 */
export const MAX_DESCRIPTION_HTML_CHARS = 64 * 1024;
/** Most of a description's text that becomes part of a requirement. */
export const MAX_DESCRIPTION_CHARS = 64 * 1024;
export const TRUNCATED = '\n[description truncated]';

/** Compiled once: html-to-text builds its selector tree per compile. */
const htmlToText = compile({
  wordwrap: false,
  limits: { maxInputLength: MAX_DESCRIPTION_HTML_CHARS, maxDepth: 100, maxChildNodes: 5000, ellipsis: '…' },
  selectors: [
    ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } })),
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
    { selector: 'img', format: 'skip' },
    { selector: 'table', format: 'dataTable', options: { uppercaseHeaderCells: false } },
    { selector: 'ul', options: { itemPrefix: '- ' } },
  ],
});

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A usable string; v2 sends nulls as the string "None". */
function usable(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const s = v.trim();
  return s === '' || s === 'None' ? null : s;
}

/** At most `max` UTF-16 units, never half a surrogate pair, marked when cut. */
export function clip(s: string, max: number, marker = ''): string {
  if (s.length <= max) return s;
  let end = max;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return s.slice(0, end) + marker;
}

/**
 * The description as plain text, at most MAX_DESCRIPTION_CHARS: Plane sends it stripped, as HTML
 * and/or as a ProseMirror document. HTML goes through html-to-text (a maintained parser, not a
 * regex: `/<[^>]*>/` is quadratic on a run of `<`), cut to MAX_DESCRIPTION_HTML_CHARS first.
 */
export function descriptionText(data: Json): string {
  return clip(rawDescription(data), MAX_DESCRIPTION_CHARS, TRUNCATED);
}

function rawDescription(data: Json): string {
  const stripped = usable(data.description_stripped);
  if (stripped !== null) return stripped;
  const html = usable(data.description_html);
  if (html !== null) {
    const cut = html.length > MAX_DESCRIPTION_HTML_CHARS;
    const plain = htmlToText(clip(html, MAX_DESCRIPTION_HTML_CHARS)).replace(/\n{3,}/g, '\n\n');
    return plain.trim() + (cut ? TRUNCATED : '');
  }
  if (typeof data.description === 'string') return usable(data.description) ?? '';
  if (isObject(data.description)) return proseMirrorText(data.description).trim();
  return '';
}

const BLOCKS = new Set(['paragraph', 'heading', 'listItem', 'blockquote', 'codeBlock']);

/** Depth-limited: the body's nesting is bounded (MAX_JSON_DEPTH), and so is this recursion. */
function proseMirrorText(node: Json, depth = 0): string {
  if (depth > 50) return '';
  if (typeof node.text === 'string') return node.text;
  const children = Array.isArray(node.content) ? node.content.filter(isObject) : [];
  const inner = children.map((c) => proseMirrorText(c, depth + 1)).join('');
  return typeof node.type === 'string' && BLOCKS.has(node.type) ? `${inner}\n` : inner;
}
