import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../src/database/data-source-options';
import { runMigrations } from '../src/database/prepare-database';
import { testDatabaseUrl } from './support/env';

/** Creates an empty database beside the run's, hands its URL to `work`, then drops it. */
async function withScratchDatabase(suffix: string, work: (url: string) => Promise<void>): Promise<void> {
  const url = new URL(testDatabaseUrl());
  const name = `${url.pathname.slice(1)}_${suffix}`;
  url.pathname = '/postgres';
  const pg = new Client({ connectionString: url.toString() });
  await pg.connect();
  try {
    await pg.query(`CREATE DATABASE "${name}"`);
    url.pathname = `/${name}`;
    await work(url.toString());
  } finally {
    await pg.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await pg.end();
  }
}

/** Entities and migrations agree: what TypeORM would generate from the entities is nothing. */
describe('schema', () => {
  it('has no drift between the entities and the migrated database', async () => {
    const ds = new DataSource({ ...dataSourceOptions(testDatabaseUrl(), 2) });
    await ds.initialize();
    try {
      const pending = await ds.driver.createSchemaBuilder().log();
      expect(pending.upQueries.map((q) => q.query)).toEqual([]);
    } finally {
      await ds.destroy();
    }
  });

  it('migrates up, all the way down and up again on an empty database', async () => {
    await withScratchDatabase('updown', async (url) => {
      const applied = await runMigrations(url);
      expect(applied.length).toBeGreaterThan(0);
      const ds = new DataSource({ ...dataSourceOptions(url, 2) });
      await ds.initialize();
      for (let i = 0; i < applied.length; i++) await ds.undoLastMigration();
      const { length: tables } = await ds.query(
        `SELECT 1 FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'migrations'`,
      );
      expect(tables).toBe(0);
      await ds.destroy();
      expect(await runMigrations(url)).toEqual(applied);
      // A second start applies nothing (the advisory-locked runner is idempotent).
      expect(await runMigrations(url)).toEqual([]);
    });
  });

  it('applies migrations once when several replicas start at the same moment', async () => {
    await withScratchDatabase('race', async (url) => {
      const results = await Promise.all(Array.from({ length: 4 }, () => runMigrations(url)));
      const total = results.reduce((n, r) => n + r.length, 0);
      expect(total).toBe(Math.max(...results.map((r) => r.length)));
    });
  });
});
