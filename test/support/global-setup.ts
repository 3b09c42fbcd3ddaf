import { randomBytes } from 'node:crypto';
import { prepareDatabase } from '../../src/database/prepare-database';

/**
 * One database and one Redis key prefix per test run, so runs never see each other's rows or jobs.
 * The names reach the test files through the environment (jest copies it to its workers).
 */
export default async function globalSetup(): Promise<void> {
  const id = `${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const base = process.env.TEST_DATABASE_BASE_URL ?? 'postgres://postgres@127.0.0.1:5432';
  process.env.ONCEFLOW_TEST_RUN_ID = id;
  process.env.ONCEFLOW_TEST_DATABASE_URL = `${base}/onceflow_test_${id}`;
  process.env.ONCEFLOW_TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
  await prepareDatabase(process.env.ONCEFLOW_TEST_DATABASE_URL);
}
