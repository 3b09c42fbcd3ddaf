/** Anything with TypeORM's query(): a DataSource, an EntityManager or a QueryRunner. */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

/**
 * Rows of any statement. TypeORM's `query()` answers `[rows, rowCount]` for UPDATE and DELETE
 * (even with RETURNING) but plain rows for everything else; this hides the difference.
 */
export async function queryRows<T>(db: Queryable, sql: string, params: unknown[] = []): Promise<T[]> {
  const res = await db.query(sql, params);
  if (Array.isArray(res) && res.length === 2 && Array.isArray(res[0]) && typeof res[1] === 'number')
    return res[0] as T[];
  return res as T[];
}
