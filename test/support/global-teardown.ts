import Redis from 'ioredis';
import { rmSync } from 'node:fs';
import { Client } from 'pg';

/** Drops the run's database and Redis keys unless KEEP_TEST_DB is set (for post-mortems). */
export default async function globalTeardown(): Promise<void> {
  if (process.env.ONCEFLOW_TEST_SCRIPTS) rmSync(process.env.ONCEFLOW_TEST_SCRIPTS, { recursive: true, force: true });
  if (process.env.KEEP_TEST_DB) return;
  const url = new URL(process.env.ONCEFLOW_TEST_DATABASE_URL!);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const pg = new Client({ connectionString: url.toString() });
  await pg.connect();
  await pg.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => undefined);
  await pg.end();
  const redis = new Redis(process.env.ONCEFLOW_TEST_REDIS_URL!);
  const stream = redis.scanStream({ match: `oft_${process.env.ONCEFLOW_TEST_RUN_ID}*`, count: 1000 });
  for await (const keys of stream) if ((keys as string[]).length) await redis.unlink(...(keys as string[]));
  await redis.quit();
}
