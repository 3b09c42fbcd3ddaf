import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from './data-source-options';

/** Any constant works; every onceflow replica uses this one so migrations run once at a time. */
export const MIGRATION_ADVISORY_LOCK = 7_319_004_211;

/** Creates the database named by the URL when it is missing (42P04 = someone else just did). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) return;
  const probe = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await probe.connect();
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== '3D000') throw err;
  } finally {
    await probe.end().catch(() => undefined);
  }
  url.pathname = '/postgres';
  const admin = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42P04') throw err;
  } finally {
    await admin.end();
  }
}

/** Applies pending migrations under a Postgres advisory lock, so replicas may start together. */
export async function runMigrations(databaseUrl: string): Promise<string[]> {
  const ds = new DataSource({ ...dataSourceOptions(databaseUrl, 2), logging: false });
  await ds.initialize();
  const lockRunner = ds.createQueryRunner();
  try {
    await lockRunner.connect();
    await lockRunner.query('SELECT pg_advisory_lock($1)', [MIGRATION_ADVISORY_LOCK]);
    const applied = await ds.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    await lockRunner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_ADVISORY_LOCK]).catch(() => undefined);
    await lockRunner.release();
    await ds.destroy();
  }
}

export async function prepareDatabase(databaseUrl: string): Promise<string[]> {
  await ensureDatabase(databaseUrl);
  return runMigrations(databaseUrl);
}
