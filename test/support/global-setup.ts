import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareDatabase } from '../../src/database/prepare-database';
import { ensureChromium, runsBrowserTest } from './chromium';

/**
 * One database and one Redis key prefix per test run, so runs never see each other's rows or jobs.
 * The names reach the test files through the environment (jest copies it to its workers).
 * When the run includes the browser test, Debian's chromium is installed first if it is missing.
 */
export default async function globalSetup(globalConfig: { testPathPatterns?: { patterns?: string[] } }): Promise<void> {
  if (runsBrowserTest(globalConfig.testPathPatterns?.patterns ?? []))
    ensureChromium((line) => process.stdout.write(`\n${line}\n`));
  const id = `${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const base = process.env.TEST_DATABASE_BASE_URL ?? 'postgres://postgres@127.0.0.1:5432';
  process.env.ONCEFLOW_TEST_RUN_ID = id;
  process.env.ONCEFLOW_TEST_DATABASE_URL = `${base}/onceflow_test_${id}`;
  process.env.ONCEFLOW_TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
  await prepareDatabase(process.env.ONCEFLOW_TEST_DATABASE_URL);
  // Run commands execute as an unprivileged user: they get the test orchestrators from a copy
  // anyone may read, wherever the repository was cloned.
  const scripts = mkdtempSync(join(tmpdir(), 'onceflow-test-scripts-'));
  for (const f of readdirSync(__dirname).filter((n) => /\.(sh|js)$/.test(n) && !n.startsWith('stryker'))) {
    copyFileSync(join(__dirname, f), join(scripts, f));
    chmodSync(join(scripts, f), 0o755);
  }
  chmodSync(scripts, 0o755);
  process.env.ONCEFLOW_TEST_SCRIPTS = scripts;
}
