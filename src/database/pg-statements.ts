import { createHash } from 'node:crypto';
import { escapeLiteral, Pool, PoolClient, QueryResult } from 'pg';
import type { Statement } from './named-params';
import { DataSource } from 'typeorm';
import { Logger } from '@nestjs/common';

/** pg's pool under TypeORM, for the two things TypeORM's `query()` cannot do (see PgStatements). */
export function pgPool(ds: DataSource): Pool {
  return (ds.driver as unknown as { master: Pool }).master;
}

const names = new Map<string, string>();

function nameOf(prefix: string, text: string): string {
  const key = `${prefix}${text}`;
  let name = names.get(key);
  if (!name) {
    name = `${prefix}${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    names.set(key, name);
  }
  return name;
}

function isMissingPrepared(err: unknown): boolean {
  return (err as { code?: string })?.code === '26000';
}

export interface PgStatementsOptions {
  /** PG_PREPARED_STATEMENTS: false behind a pooler that cannot keep prepared statements. */
  prepare: boolean;
}

/**
 * The hot path's statements (claim, finalize, dispatch, intake), sent on pg's pool directly.
 * Prepared statements save Postgres a parse and plan per call; names are a hash of the text, so
 * two texts never share a name. Whether to prepare is a setting; if prepared statements vanish
 * anyway (26000: a pooler swapped the server connection, a DEALLOCATE), this instance stops
 * preparing, because the same thing would happen again.
 */
export class PgStatements {
  private readonly log = new Logger('Postgres');
  private prepareNamed: boolean;
  private prepareSql: boolean;
  /** SQL-level prepared statements (PREPARE name AS …) made on each pooled connection. */
  private readonly preparedOn = new WeakMap<object, Set<string>>();

  constructor(
    private readonly ds: DataSource,
    options: PgStatementsOptions,
  ) {
    this.prepareNamed = options.prepare;
    this.prepareSql = options.prepare;
  }

  /**
   * One statement, outside any transaction: the 26000 fallback sends it again unnamed, which is
   * only safe because nothing ran. Behind a transaction-pooling PgBouncer set
   * `max_prepared_statements` (PgBouncer ≥ 1.21) or turn preparing off.
   */
  async preparedRows<T>(text: string, values: unknown[]): Promise<T[]> {
    if (!this.prepareNamed) return this.ds.query(text, values);
    try {
      const res = await pgPool(this.ds).query({ name: nameOf('of_', text), text, values });
      return res.rows as T[];
    } catch (err) {
      if (!isMissingPrepared(err)) throw err;
      if (this.prepareNamed)
        this.log.warn(
          'prepared statements went missing on a connection (a pooler in transaction mode?): no longer preparing',
        );
      this.prepareNamed = false;
      return this.ds.query(text, values);
    }
  }

  /**
   * Several statements in ONE round trip: the simple query protocol runs them as one implicit
   * transaction, and under READ COMMITTED each statement takes its own snapshot — so a statement
   * that waited for a row lock in an earlier one sees what the lock holder committed. The simple
   * protocol has no bind parameters: each statement is PREPAREd once per connection and run as
   * `EXECUTE name(literals)`, the values escaped (literal()). Answers the rows of the last statement.
   */
  async inOneRoundTrip<T>(statements: Statement[]): Promise<T[]> {
    const client = await pgPool(this.ds).connect();
    try {
      if (this.prepareSql) {
        try {
          return await this.executePrepared<T>(client, statements);
        } catch (err) {
          // The whole implicit transaction was rolled back: nothing ran, so inlining is safe.
          if (!isMissingPrepared(err)) throw err;
          if (this.prepareSql)
            this.log.warn(
              'PREPAREd statements went missing on a connection (a pooler in transaction mode?): no longer preparing',
            );
          this.prepareSql = false;
        }
      }
      return lastRows<T>(await client.query(statements.map((s) => inlineParams(s.text, s.values)).join(';\n')));
    } finally {
      // A connection that broke (a socket error, a FATAL: GuardedPgClient) is no longer
      // queryable, and pg-pool discards it on release.
      client.release();
    }
  }

  private async executePrepared<T>(client: PoolClient, statements: Statement[]): Promise<T[]> {
    let prepared = this.preparedOn.get(client);
    if (!prepared) this.preparedOn.set(client, (prepared = new Set()));
    const named = statements.map((s) => ({ ...s, name: nameOf('ot_', s.text) }));
    const missing = named.filter((s) => !prepared.has(s.name));
    if (missing.length) {
      await client.query(missing.map((s) => `PREPARE ${s.name} AS ${s.text}`).join(';\n'));
      for (const s of missing) prepared.add(s.name);
    }
    const sql = named
      .map((s) => `EXECUTE ${s.name}${s.values.length ? `(${s.values.map(literal).join(', ')})` : ''}`)
      .join(';\n');
    return lastRows<T>(await client.query(sql));
  }
}

function lastRows<T>(res: QueryResult | QueryResult[]): T[] {
  const last = Array.isArray(res) ? res[res.length - 1] : res;
  return last.rows as T[];
}

/** `$n` placeholders replaced by SQL literals. The texts are ours: no `$n` inside their quotes. */
export function inlineParams(text: string, values: unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i < 0 || i >= values.length) throw new Error(`inlineParams: no value for $${n}`);
    return literal(values[i]);
  });
}

export function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'string') return escapeLiteral(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`literal: ${v} is not a finite number`);
    return v < 0 ? `(${v})` : String(v);
  }
  if (typeof v === 'bigint') return v < 0n ? `(${v})` : v.toString();
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (v instanceof Date) return escapeLiteral(v.toISOString());
  if (Array.isArray(v)) return v.length ? `ARRAY[${v.map(literal).join(', ')}]` : `'{}'`;
  throw new Error(`literal: cannot inline a ${typeof v}`);
}
