import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { AppConfig, loadConfig } from './app-config';

/**
 * The development API key when API_KEYS is unset outside production: kept in a 0600 file so that
 * `npm start` serves out of the box without a key ever appearing in a log line.
 */
export const DEV_KEY_FILE = resolve('.onceflow-dev-api-key');

function devKey(): string {
  if (existsSync(DEV_KEY_FILE)) return readFileSync(DEV_KEY_FILE, 'utf8').trim();
  const key = `dev_${randomBytes(24).toString('hex')}`;
  writeFileSync(DEV_KEY_FILE, `${key}\n`, { mode: 0o600 });
  return key;
}

/** The only place that reads process.env. */
export function configFromProcessEnv(overrides: Record<string, string | undefined> = {}): AppConfig {
  return loadConfig({ ...process.env, ...overrides }, devKey);
}

/** Environment for child processes (the orchestrator command inherits the worker's environment). */
export function processEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}
