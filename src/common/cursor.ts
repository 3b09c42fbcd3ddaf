import { RequestError, RequestErrorCode } from './domain-error';

/**
 * Opaque keyset cursor of the list routes: (created_at in microseconds, id) of the last row of a
 * page. Microseconds, not a JS Date: rows created within one millisecond must not be skipped.
 */
export interface KeysetCursor {
  createdUs: string;
  id: string;
}

export function encodeCursor(createdUs: string, id: string): string {
  return Buffer.from(JSON.stringify([String(createdUs), id])).toString('base64url');
}

export function decodeCursor(cursor: string): KeysetCursor {
  try {
    const [createdUs, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      typeof createdUs !== 'string' ||
      !/^\d{1,17}$/.test(createdUs) ||
      typeof id !== 'string' ||
      !/^[0-9a-f-]{36}$/i.test(id)
    )
      throw new Error();
    return { createdUs, id };
  } catch {
    throw new RequestError(RequestErrorCode.INVALID_CURSOR, 'cursor is not valid');
  }
}

/** SQL of "after this cursor" for `ORDER BY created_at DESC, id DESC`; pushes its two parameters. */
export function afterCursor(cursor: string, params: unknown[]): string {
  const c = decodeCursor(cursor);
  return `(created_at, id) < (timestamptz 'epoch' + $${params.push(c.createdUs)}::bigint * interval '1 microsecond', $${params.push(c.id)}::uuid)`;
}

/** The select-list column that `nextCursor` is built from. */
export const CREATED_US = `(EXTRACT(EPOCH FROM created_at) * 1000000)::bigint AS created_us`;

/** Splits a `LIMIT limit + 1` result into the page and the cursor of the next one (null: last page). */
export function toPage<R extends { created_us: string; id: string }, V>(
  rows: R[],
  limit: number,
  view: (row: R) => V,
): { items: V[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map(view),
    nextCursor: rows.length > limit && last ? encodeCursor(last.created_us, last.id) : null,
  };
}
