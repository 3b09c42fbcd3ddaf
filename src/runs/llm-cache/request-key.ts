import { createHash } from 'node:crypto';

export type LlmProvider = 'openai' | 'anthropic';

/** JSON with object keys sorted at every level: two bodies that parse equal print equal. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The cache key of a request: provider, path and JSON body (object keys in any order). Headers —
 * the API key above all — and the query string are not part of it. Undefined when the body is not
 * JSON we can key (such a request is forwarded, never cached).
 */
export function requestKey(
  provider: LlmProvider,
  path: string,
  body: Buffer,
): { hash: string; stream: boolean } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
    const canonical = canonicalJson(parsed);
    const hash = createHash('sha256')
      .update(JSON.stringify([provider, path, canonical]))
      .digest('hex');
    const stream = typeof parsed === 'object' && parsed !== null && (parsed as { stream?: unknown }).stream === true;
    return { hash, stream };
  } catch {
    // Not JSON, or nested deeper than the stack allows: nothing to key on.
    return undefined;
  }
}
