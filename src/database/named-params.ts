/** A statement with positional parameters, as pg takes it. */
export interface Statement {
  text: string;
  values: unknown[];
}

/** A statement (or a fragment of one) whose placeholders are `:name`, bound from `values`. */
export interface NamedStatement {
  text: string;
  values: Record<string, unknown>;
}

// `:name` but not the second colon of a `::type` cast.
const PLACEHOLDER = /(?<!:):([A-Za-z_][A-Za-z0-9_]*)/g;

/**
 * Turns `:name` placeholders into `$1, $2, …` in order of first use, so that callers never count
 * parameters across files. The same name twice is the same parameter. The text must be ours:
 * a `:name` inside a quoted literal would be taken for a placeholder.
 */
export function bindNamed(text: string, values: Record<string, unknown>): Statement {
  const order = new Map<string, number>();
  const positional: unknown[] = [];
  const bound = text.replace(PLACEHOLDER, (_, name: string) => {
    let n = order.get(name);
    if (n === undefined) {
      if (!Object.prototype.hasOwnProperty.call(values, name)) throw new Error(`bindNamed: no value for :${name}`);
      n = positional.push(values[name]);
      order.set(name, n);
    }
    return `$${n}`;
  });
  const unused = Object.keys(values).filter((k) => !order.has(k));
  if (unused.length) throw new Error(`bindNamed: unused values ${unused.join(', ')}`);
  return { text: bound, values: positional };
}

/** Merges the values of several fragments of one statement; a name given twice is a bug. */
export function mergeValues(...parts: Array<Record<string, unknown> | undefined>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [k, v] of Object.entries(part ?? {})) {
      if (Object.prototype.hasOwnProperty.call(out, k)) throw new Error(`mergeValues: :${k} given twice`);
      out[k] = v;
    }
  }
  return out;
}

/** `a, b` → `t.a, t.b`. */
export function prefixed(table: string, columns: string): string {
  return columns
    .split(', ')
    .map((c) => `${table}.${c}`)
    .join(', ');
}
