import { createHash } from 'node:crypto';
import { escapeLiteral } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { pgErrorCode } from '../database/transaction';

/**
 * The hot path's two ways to spend fewer Postgres round trips and less planning than TypeORM's
 * `query()` allows. Measured with `npm run bench` (docs/benchmarks.md): on a 2-core machine each
 * round trip and each re-plan of the transition statement is a visible share of a run's cost.
 */

export interface Statement {
  text: string;
  values: unknown[];
}

interface PgClient {
  query(q: { name?: string; text: string; values?: unknown[] }): Promise<{ rows: unknown[] } | Array<{ rows: unknown[] }>>;
}

/**
 * Off for good once a prepared statement went missing (26000): behind a transaction-pooling
 * PgBouncer consecutive statements may reach different server connections. Then everything runs
 * unprepared: slower, never wrong.
 */
let preparing = true;

/** A prepared statement the connection no longer has: nothing was executed, a retry is safe. */
export function isLostPreparedStatement(err: unknown): boolean {
  return pgErrorCode(err) === '26000';
}

function unprepared(err: unknown): void {
  if (!isLostPreparedStatement(err)) throw err;
  preparing = false;
}

const statementNames = new Map<string, string>();
/** Statements PREPAREd through SQL on each pg client (a connection's own, gone with it). */
const sqlPrepared = new WeakMap<PgClient, Set<string>>();

/** A statement's name, from its text: the same text gets the same name on every connection. */
function nameOf(text: string, prefix: string): string {
  const key = prefix + text;
  let name = statementNames.get(key);
  if (!name) {
    name = `${prefix}${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    statementNames.set(key, name);
  }
  return name;
}

/** The pg client under `db` (the transaction's own, or one from the pool), handed back afterwards. */
async function withClient<T>(db: DataSource | EntityManager, work: (client: PgClient) => Promise<T>): Promise<T> {
  const inTx = db instanceof EntityManager ? db.queryRunner : undefined;
  const runner = inTx ?? (db instanceof EntityManager ? db.connection : db).createQueryRunner();
  try {
    // TypeORM's QueryRunner.connect() answers the driver's connection: the pg client itself.
    return await work((await runner.connect()) as PgClient);
  } finally {
    if (!inTx) await runner.release();
  }
}

/**
 * Runs one statement as a NAMED prepared statement: Postgres parses and plans it once per
 * connection instead of on every call, which for the transition CTE is most of its server cost.
 * The name comes from the text, so each distinct statement is prepared once per connection.
 * Answers the rows whatever the command (no TypeORM `[rows, count]` for UPDATE).
 */
export async function preparedRows<T>(db: DataSource | EntityManager, text: string, values: unknown[]): Promise<T[]> {
  const inTx = db instanceof EntityManager && db.queryRunner !== undefined;
  const res = await withClient(db, async (client) => {
    if (!preparing) return client.query({ text, values });
    try {
      return await client.query({ name: nameOf(text, 'onceflow_'), text, values });
    } catch (err) {
      unprepared(err);
      // Inside a transaction the error has aborted it: the caller's retry runs unprepared.
      if (inTx) throw err;
      return client.query({ text, values });
    }
  });
  return (res as { rows: T[] }).rows;
}

/**
 * Sends several statements as ONE simple-protocol query, so ONE round trip. Postgres runs them
 * as one implicit transaction (all or nothing; an error rolls back and leaves the connection
 * clean), and in READ COMMITTED each statement takes a fresh snapshot: a row lock taken by the
 * first is followed by a view, in the next, of everything committed before the lock was granted.
 * The simple protocol has no parameters, so each statement is PREPAREd once per connection (its
 * plan is kept, as with preparedRows) and run as `EXECUTE name(<literals>)` (`literal`).
 * Answers the rows of each statement, in order.
 */
export async function inOneRoundTrip(ds: DataSource, statements: Statement[]): Promise<unknown[][]> {
  return withClient(ds, async (client) => {
    let res: Awaited<ReturnType<PgClient['query']>>;
    try {
      res = preparing ? await executePrepared(client, statements) : await client.query({ text: statements.map(inline).join(';\n') });
    } catch (err) {
      unprepared(err);
      res = await client.query({ text: statements.map(inline).join(';\n') });
    }
    return (Array.isArray(res) ? res : [res]).map((r) => r.rows);
  });
}

/** PREPAREs what this connection has not seen yet (once), then one round trip of EXECUTEs. */
async function executePrepared(client: PgClient, statements: Statement[]): ReturnType<PgClient['query']> {
  const names = statements.map((s) => nameOf(s.text, 'onceflow_x_'));
  let prepared = sqlPrepared.get(client);
  if (!prepared) sqlPrepared.set(client, (prepared = new Set()));
  for (const [i, s] of statements.entries()) {
    if (prepared.has(names[i])) continue;
    // 42P05: prepared already (our bookkeeping lost track of it): as good as done.
    await client.query({ text: `PREPARE ${names[i]} AS ${s.text}` }).catch((err: unknown) => {
      if (pgErrorCode(err) !== '42P05') throw err;
    });
    prepared.add(names[i]);
  }
  return client.query({ text: statements.map((s, i) => `EXECUTE ${names[i]}(${s.values.map(literal).join(', ')})`).join(';\n') });
}

/** `$n` placeholders replaced by literals. Our statements have no `$` inside string constants. */
function inline(s: Statement): string {
  return s.text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i < 0 || i >= s.values.length) throw new Error(`no value for $${n}`);
    return literal(s.values[i]);
  });
}

/** A value as a SQL literal; strings through pg's escapeLiteral (safe whatever the string holds). */
export function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`not a finite number: ${v}`);
    return v < 0 ? `(${v})` : String(v);
  }
  if (typeof v === 'bigint') return v < 0n ? `(${v})` : String(v);
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'string') return escapeLiteral(v);
  if (v instanceof Date) return escapeLiteral(v.toISOString());
  if (Array.isArray(v)) return v.length ? `ARRAY[${v.map(literal).join(', ')}]` : `'{}'`;
  return escapeLiteral(JSON.stringify(v));
}
