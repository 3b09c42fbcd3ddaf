import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, startProcess } from './support/app';
import { ROOT, tempDir, testEnv } from './support/env';

/**
 * `npm start` outside production with nothing set: the API and the dashboard both work, with
 * development credentials kept in 0600 files in the working directory, named (never printed) in
 * the start-up line. In production, unset admin credentials keep the dashboard closed.
 */
const KEY_FILE = '.onceflow-dev-api-key';
const ADMIN_FILE = '.onceflow-dev-admin';
const basic = (pair: string) => ({ Authorization: `Basic ${Buffer.from(pair).toString('base64')}` });

// A real process in a directory of its own: the files are written where it runs, as for `npm start`.
function env(tag: string, overrides: Record<string, string>): Record<string, string> {
  // Empty counts as unset (as in an .env file copied from .env.example).
  return testEnv(tag, join(tempDir(tag), 'executions.log'), {
    API_KEYS: '',
    ADMIN_USER: '',
    ADMIN_PASSWORD: '',
    LOG_LEVEL: 'trace',
    ...overrides,
  });
}

describe('development credentials', () => {
  it('are generated into 0600 files, named but never printed, and open the API and /admin/queues', async () => {
    const cwd = tempDir('dev-creds');
    const proc = await startProcess(env('dev-creds', { NODE_ENV: 'development' }), 'api', { cwd });
    const base = `http://127.0.0.1:${proc.port}`;
    let pair: string;
    let key: string;
    try {
      for (const file of [KEY_FILE, ADMIN_FILE]) expect(statSync(join(cwd, file)).mode & 0o777).toBe(0o600);
      pair = readFileSync(join(cwd, ADMIN_FILE), 'utf8').trim();
      key = readFileSync(join(cwd, KEY_FILE), 'utf8').trim();
      expect(pair).toMatch(/^admin:[A-Za-z0-9_-]{24}$/);

      expect((await fetch(`${base}/admin/queues`, { headers: basic(pair) })).status).toBe(200);
      expect((await fetch(`${base}/admin/queues/api/queues`, { headers: basic(pair) })).status).toBe(200);
      const without = await fetch(`${base}/admin/queues`);
      expect(without.status).toBe(401);
      expect(without.headers.get('www-authenticate')).toBe('Basic realm="onceflow"');
      expect((await fetch(`${base}/admin/queues`, { headers: basic(`${pair}x`) })).status).toBe(401);
      expect((await fetch(`${base}/api/projects`, { headers: { Authorization: `Bearer ${key}` } })).status).toBe(200);
    } finally {
      await proc.stop();
    }
    const out = proc.output();
    expect(out).toContain(`a development key is in ${join(cwd, KEY_FILE)}`);
    expect(out).toContain(`/admin/queues credentials (user:password) are in ${join(cwd, ADMIN_FILE)}`);
    // Requests were logged (trace), so the absence below is not vacuous.
    expect(out).toMatch(/\/admin\/queues/);
    for (const secret of [pair, pair.split(':')[1], key, basic(pair).Authorization.slice('Basic '.length)])
      expect(out).not.toContain(secret);

    // A restart keeps them: the operator's saved login still works.
    const again = await startProcess(env('dev-creds-2', { NODE_ENV: 'development' }), 'api', { cwd });
    try {
      expect(readFileSync(join(cwd, ADMIN_FILE), 'utf8').trim()).toBe(pair);
      expect((await fetch(`http://127.0.0.1:${again.port}/admin/queues`, { headers: basic(pair) })).status).toBe(200);
    } finally {
      await again.stop();
    }
  });

  it('are never generated in production: /admin/queues stays closed (503)', async () => {
    const cwd = tempDir('prod-creds');
    const proc = await startProcess(
      env('prod-creds', { NODE_ENV: 'production', API_KEYS: 'prod-api-key-0123456789abcdef' }),
      'api',
      { cwd },
    );
    try {
      const res = await fetch(`http://127.0.0.1:${proc.port}/admin/queues`, { headers: basic('admin:anything') });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'admin dashboard not configured',
      });
    } finally {
      await proc.stop();
    }
    expect(existsSync(join(cwd, ADMIN_FILE))).toBe(false);
    expect(proc.output()).not.toContain(ADMIN_FILE);
  });

  it('refuses to start, in one line, on a credentials file that is not user:password', async () => {
    const cwd = tempDir('bad-creds');
    writeFileSync(join(cwd, ADMIN_FILE), 'no-colon-here\n', { mode: 0o600 });
    const res = spawnSync(process.execPath, [join(ROOT, 'dist/src/main.js')], {
      cwd,
      env: {
        ...process.env,
        ...env('bad-creds', { NODE_ENV: 'development', APP_ROLE: 'api', PORT: String(await freePort()) }),
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(res.status).toBe(1);
    expect(res.stderr.trim()).toBe(
      `onceflow: ${join(cwd, ADMIN_FILE)} must hold "user:password": delete it to generate new development credentials`,
    );
  });
});
