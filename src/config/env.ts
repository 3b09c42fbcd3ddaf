import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { AdminCredentials, AppConfig, ConfigError, loadConfig } from './app-config';

/**
 * Development credentials, used when their variables are unset outside production: kept in 0600
 * files in the working directory so that `npm start` serves out of the box (API and dashboard)
 * without a secret ever appearing in a log line. The start-up line names the files.
 */
export const DEV_KEY_FILE = resolve('.onceflow-dev-api-key');
export const DEV_ADMIN_FILE = resolve('.onceflow-dev-admin');

/**
 * The file's content, written first if the file is missing. Written to a temporary file and linked
 * into place, so replicas starting together agree on one value and never read a half-written file.
 */
function readOrCreate(path: string, make: () => string, variables: string): string {
  try {
    if (!existsSync(path)) {
      const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
      writeFileSync(tmp, `${make()}\n`, { mode: 0o600, flag: 'wx' });
      try {
        linkSync(tmp, path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      } finally {
        unlinkSync(tmp);
      }
    }
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new ConfigError(`cannot keep development credentials in ${path} (${code}): set ${variables}`);
  }
}

function devKey(): string {
  return readOrCreate(DEV_KEY_FILE, () => `dev_${randomBytes(24).toString('hex')}`, 'API_KEYS');
}

/** `user:password`; the user has no ':' (basic auth splits on the first one). */
function devAdmin(): AdminCredentials {
  const pair = readOrCreate(
    DEV_ADMIN_FILE,
    () => `admin:${randomBytes(18).toString('base64url')}`,
    'ADMIN_USER and ADMIN_PASSWORD',
  );
  const colon = pair.indexOf(':');
  const user = pair.slice(0, colon);
  const password = pair.slice(colon + 1);
  if (colon < 1 || password === '') {
    throw new ConfigError(
      `${DEV_ADMIN_FILE} must hold "user:password": delete it to generate new development credentials`,
    );
  }
  return { user, password };
}

/** The only place that reads process.env. */
export function configFromProcessEnv(overrides: Record<string, string | undefined> = {}): AppConfig {
  return loadConfig({ ...process.env, ...overrides }, { apiKey: devKey, admin: devAdmin });
}

/** Environment for child processes (the orchestrator command inherits the worker's environment). */
export function processEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}
