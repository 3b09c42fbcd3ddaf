import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import { prepareDatabase } from '../../src/database/prepare-database';

/**
 * globalSetup under Stryker (jest.stryker.config.js). Stryker's jest-runner calls it once per
 * mutant inside a long-lived worker, and kills a worker whose mutant hangs before globalTeardown
 * can drop its database. So the run id carries the worker's pid, and each setup first drops what
 * dead Stryker workers left behind (their database and their Redis keys). Otherwise the same as
 * global-setup.ts: one database, one Redis prefix and one readable copy of the test orchestrators
 * per jest run, so workers never collide.
 */
export default async function strykerGlobalSetup(): Promise<void> {
  // The bail flag of stryker-environment.js belongs to one jest run.
  delete process.env.ONCEFLOW_STRYKER_FAILED;
  const base = process.env.TEST_DATABASE_BASE_URL ?? 'postgres://postgres@127.0.0.1:5432';
  const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
  await dropLeftovers(base, redisUrl);
  const id = `mut${process.pid}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  process.env.ONCEFLOW_TEST_RUN_ID = id;
  process.env.ONCEFLOW_TEST_DATABASE_URL = `${base}/onceflow_test_${id}`;
  process.env.ONCEFLOW_TEST_REDIS_URL = redisUrl;
  await prepareDatabase(process.env.ONCEFLOW_TEST_DATABASE_URL);
  // Run commands execute as an unprivileged user, and Stryker's sandbox is private to its owner
  // (0700): the test orchestrators must come from a copy anyone may read, as in global-setup.ts.
  const scripts = mkdtempSync(join(tmpdir(), 'onceflow-test-scripts-'));
  for (const f of readdirSync(__dirname).filter((n) => /\.(sh|js)$/.test(n) && !n.startsWith('stryker'))) {
    copyFileSync(join(__dirname, f), join(scripts, f));
    chmodSync(join(scripts, f), 0o755);
  }
  chmodSync(scripts, 0o755);
  process.env.ONCEFLOW_TEST_SCRIPTS = scripts;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function dropLeftovers(base: string, redisUrl: string): Promise<void> {
  const pg = new Client({ connectionString: `${base}/postgres` });
  await pg.connect();
  const dead: number[] = [];
  try {
    const { rows } = await pg.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE 'onceflow\\_test\\_mut%'`,
    );
    for (const { datname } of rows) {
      const pid = Number(/^onceflow_test_mut(\d+)_/.exec(datname)?.[1]);
      if (!pid || alive(pid)) continue;
      dead.push(pid);
      await pg.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => undefined);
    }
  } finally {
    await pg.end();
  }
  if (!dead.length) return;
  const redis = new Redis(redisUrl);
  try {
    for (const pid of new Set(dead)) {
      for await (const keys of redis.scanStream({ match: `oft_mut${pid}_*`, count: 1000 })) {
        if ((keys as string[]).length) await redis.unlink(...(keys as string[]));
      }
    }
  } finally {
    await redis.quit();
  }
}
