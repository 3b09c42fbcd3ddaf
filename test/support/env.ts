import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AppConfig, loadConfig } from '../../src/config/app-config';

export const API_KEY = 'test-api-key-0123456789abcdef';
export const ROOT = resolve(__dirname, '../..');
/**
 * The test orchestrators, from a world-readable copy the global setup made: a run's command runs
 * as an unprivileged user, which may not enter the directory the repository was cloned into.
 */
export const TEST_SCRIPTS = process.env.ONCEFLOW_TEST_SCRIPTS ?? join(ROOT, 'test/support');
export const FAKE_ORCHESTRATOR = join(TEST_SCRIPTS, 'fake-orchestrator.sh');

export const testDatabaseUrl = () => process.env.ONCEFLOW_TEST_DATABASE_URL!;
export const testRedisUrl = () => process.env.ONCEFLOW_TEST_REDIS_URL!;

/** A Redis key prefix of its own for each test file (and each call), inside the run's prefix. */
export function uniquePrefix(tag: string): string {
  return `oft_${process.env.ONCEFLOW_TEST_RUN_ID}_${tag}_${randomBytes(3).toString('hex')}`;
}

/** A scratch directory the run's command (an unprivileged user) may write into, as tests expect. */
export function tempDir(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), `onceflow-${tag}-`));
  chmodSync(dir, 0o777);
  return dir;
}

/**
 * Environment for an app under test: fast timings so faults show quickly. `overrides` win.
 * The orchestrator is the fake one, appending start/done lines to `countFile` — the outside
 * witness of how often a run really executed.
 */
export function testEnv(
  tag: string,
  countFile: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    NODE_ENV: 'test',
    DATABASE_URL: testDatabaseUrl(),
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: uniquePrefix(tag),
    API_KEYS: API_KEY,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ORCHESTRATOR_COMMAND: `sh '${FAKE_ORCHESTRATOR}' '${countFile}'`,
    WORKSPACE_ROOT: tempDir(`${tag}-ws`),
    WORKER_CONCURRENCY: '4',
    RUN_LOCK_TTL_MS: '1500',
    QUEUE_LOCK_DURATION_MS: '1500',
    QUEUE_STALLED_INTERVAL_MS: '1000',
    RUN_RETRY_BASE_DELAY_MS: '50',
    RUN_RETRY_MAX_DELAY_MS: '400',
    INFRA_RETRY_BASE_DELAY_MS: '50',
    INFRA_RETRY_MAX_DELAY_MS: '1000',
    RECONCILE_INTERVAL_MS: '1000',
    NOTIFY_RETRY_BASE_DELAY_MS: '50',
    PORT: '0',
    ...overrides,
  };
}

export function testConfig(env: Record<string, string>): AppConfig {
  return loadConfig(env);
}
