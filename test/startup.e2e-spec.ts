import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from './support/app';
import { API_KEY, ROOT, testDatabaseUrl, testRedisUrl } from './support/env';

/** An unreachable Postgres or Redis: one clear line (which, where, how to start it), exit 1. */
describe('start-up', () => {
  async function start(env: Record<string, string>) {
    const res = spawnSync(process.execPath, [join(ROOT, 'dist/src/main.js')], {
      env: { ...process.env, API_KEYS: API_KEY, LOG_LEVEL: 'silent', PORT: String(await freePort()), ...env },
      encoding: 'utf8',
      timeout: 20_000,
    });
    return { status: res.status, stderr: res.stderr.trim() };
  }

  it('names Postgres, its address and how to start it', async () => {
    const port = await freePort();
    const res = await start({ DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/x`, REDIS_URL: testRedisUrl() });
    expect(res.status).toBe(1);
    expect(res.stderr).toBe(
      `onceflow: cannot reach PostgreSQL at 127.0.0.1:${port} (ECONNREFUSED); start it with: docker compose up -d postgres redis`,
    );
  });

  it('names Redis, its address and how to start it', async () => {
    const port = await freePort();
    const res = await start({ DATABASE_URL: testDatabaseUrl(), REDIS_URL: `redis://127.0.0.1:${port}/0` });
    expect(res.status).toBe(1);
    expect(res.stderr).toBe(
      `onceflow: cannot reach Redis at 127.0.0.1:${port} (ECONNREFUSED); start it with: docker compose up -d postgres redis`,
    );
  });

  it('refuses a bad configuration in one line', async () => {
    const res = await start({ WORKER_CONCURRENCY: 'lots' });
    expect(res.status).toBe(1);
    expect(res.stderr).toBe('onceflow: WORKER_CONCURRENCY must be a whole number, got "lots"');
  });
});
