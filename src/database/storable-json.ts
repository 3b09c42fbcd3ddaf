/**
 * What Postgres cannot store as it is in jsonb (and text): `\u0000` ("unsupported Unicode escape
 * sequence") and a UTF-16 surrogate without its pair (invalid JSON text for its parser). Deeper
 * nesting than a limit is refused by us: JSON.stringify (how pg sends a jsonb parameter) and
 * Postgres' own parser both recurse.
 */
export type JsonStorageProblem = 'too_deep' | 'nul_character' | 'lone_surrogate';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

function stringProblem(s: string): JsonStorageProblem | null {
  if (s.includes('\u0000')) return 'nul_character';
  return LONE_SURROGATE.test(s) ? 'lone_surrogate' : null;
}

/** NUL and lone surrogates become U+FFFD: the text stays readable and shows where something was. */
export function storableText(s: string): string {
  return s.replace(/\u0000/g, '\ufffd').replace(LONE_SURROGATES, '\ufffd');
}

/**
 * Why `value` (parsed JSON) cannot be stored as it is, or null. Walks with an explicit stack, so
 * no nesting overflows it; keys are checked like values. `too_deep` wins over the others (it
 * cannot be stored even cleaned); a container's depth counts itself, as brackets do.
 */
export function jsonStorageProblem(value: unknown, maxDepth: number): JsonStorageProblem | null {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  let found: JsonStorageProblem | null = null;
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      found ??= stringProblem(v);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > maxDepth) return 'too_deep';
    if (Array.isArray(v)) {
      for (const item of v) (values.push(item), depths.push(depth + 1));
      continue;
    }
    for (const key of Object.keys(v)) {
      found ??= stringProblem(key);
      (values.push((v as Record<string, unknown>)[key]), depths.push(depth + 1));
    }
  }
  return found;
}

/**
 * A copy of `value` with every string (keys too) made storable by storableText. Iterative, and
 * keys are defined, never assigned: a `__proto__` key stays a plain own key instead of setting
 * the copy's prototype. Only for values jsonStorageProblem did not find too deep.
 */
export function storableCopy(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return typeof value === 'string' ? storableText(value) : value;
  const root: unknown = Array.isArray(value) ? [] : {};
  const pending: Array<[object, object]> = [[value, root as object]];
  while (pending.length > 0) {
    const [source, target] = pending.pop()!;
    for (const [key, item] of Object.entries(source)) {
      let copy: unknown;
      if (item !== null && typeof item === 'object') {
        copy = Array.isArray(item) ? [] : {};
        pending.push([item, copy as object]);
      } else copy = typeof item === 'string' ? storableText(item) : item;
      const name = Array.isArray(target) ? key : storableText(key);
      Object.defineProperty(target, name, { value: copy, enumerable: true, writable: true, configurable: true });
    }
  }
  return root;
}
