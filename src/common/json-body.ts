import type { RequestHandler } from 'express';
import { json } from 'express';

/**
 * Deepest JSON nesting any route accepts. Plane's deepest real field (a ProseMirror description
 * of nested lists) stays far below; JSON.stringify overflows the stack near 10,000 levels and
 * Postgres' json parser recurses too, so a body must be refused long before either.
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/** Occurrences of a byte, counted by the native search (a typical body has a few dozen brackets). */
function countByte(bytes: Buffer, byte: number, stopAbove: number): number {
  let n = 0;
  for (let at = bytes.indexOf(byte); at !== -1 && n <= stopAbove; at = bytes.indexOf(byte, at + 1)) n++;
  return n;
}

/**
 * True when the UTF-8 JSON text nests deeper than `max`: one pass over the bytes, no recursion,
 * brackets inside strings skipped (UTF-8 continuation bytes never equal an ASCII byte). Runs
 * before JSON.parse, which on a megabyte of `[` would block every other request for a while.
 */
export function jsonDepthExceeds(bytes: Buffer, max: number): boolean {
  // No more opening brackets than the limit (most bodies): the nesting cannot exceed it.
  if (countByte(bytes, OPEN_ARRAY, max) + countByte(bytes, OPEN_OBJECT, max) <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) depth--;
  }
  return false;
}

export class JsonTooDeepError extends Error {
  readonly status = 400;
  readonly type = 'entity.too.deep';
  constructor(max: number) {
    super(`body nests deeper than ${max} levels`);
  }
}

/**
 * The JSON body parser of every route: the body-size limit (413), the raw bytes kept on
 * `req.rawBody` (the Plane signature is computed over them) and the nesting limit (400) checked
 * before parsing. Registered under body-parser's own name (`jsonParser`), so Nest does not add
 * its default parser next to it. A body declared in another charset than UTF-8 is not scanned
 * here; the Plane intake checks the parsed depth again (storable-json.ts).
 */
export function jsonBodyParser(limitBytes: number, maxDepth = MAX_JSON_DEPTH): RequestHandler {
  return json({
    limit: limitBytes,
    verify: (req, _res, buf, encoding) => {
      (req as { rawBody?: Buffer }).rawBody = buf;
      if (/^utf-?8$/i.test(encoding) && jsonDepthExceeds(buf, maxDepth)) throw new JsonTooDeepError(maxDepth);
    },
  });
}
