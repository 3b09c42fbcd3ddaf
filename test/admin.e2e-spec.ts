import { ALL_QUEUES, RUNS_QUEUE } from '../src/queues/queue-names';
import { closeDb, createProject, createRun, startApp, startProcess, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';

const USER = 'ops';
const PASSWORD = 'board:pass-0123456789'; // a ':' inside: only the first one splits user from password
const basic = (user: string, password: string) => ({
  Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
});
const good = basic(USER, PASSWORD);

const WRONG: Array<[string, Record<string, string>]> = [
  ['no credentials', {}],
  ['a wrong password', basic(USER, 'board:pass-0123456788')],
  ['a wrong user', basic('root', PASSWORD)],
  ['an empty password', basic(USER, '')],
  ['the password with a suffix', basic(USER, `${PASSWORD}x`)],
  ['a bearer token instead', { Authorization: `Bearer ${PASSWORD}` }],
  ['a malformed header', { Authorization: 'Basic not-base64!' }],
];

// The page, the JSON API the page calls, a queue's page and a static asset: Bull Board's router
// serves all of them, and auth must sit in front of every one.
const SUB_PATHS = [
  '/admin/queues',
  '/admin/queues/',
  '/admin/queues/api/queues',
  `/admin/queues/queue/${RUNS_QUEUE}`,
  '/admin/queues/static/favicon-32x32.png',
];

const env = (tag: string, overrides: Record<string, string>) =>
  testEnv(tag, `${tempDir(tag)}/executions.log`, { APP_ROLE: 'api', ...overrides });

describe('admin dashboard (Bull Board) behind basic auth', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startApp(env('admin', { ADMIN_USER: USER, ADMIN_PASSWORD: PASSWORD }));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  describe.each(SUB_PATHS)('%s', (path) => {
    it.each(WRONG)('answers 401 with a Basic challenge to %s', async (_name, headers) => {
      const res = await t.http.get(path).set(headers);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Basic realm="onceflow"');
      expect(res.body).toEqual({ statusCode: 401, error: 'Unauthorized', message: 'admin credentials required' });
      expect(res.text).not.toContain(PASSWORD);
    });

    it('serves it with the right credentials', async () => {
      const res = await t.http.get(path).set(good);
      expect(res.status).toBe(200);
    });
  });

  it('never serves the board through an odd spelling of the path without credentials', async () => {
    const variants = [
      '/ADMIN/QUEUES',
      '/Admin/Queues/api/queues',
      '/admin/queues/./api/queues',
      '/admin//queues',
      '/admin/queues%2Fapi/queues',
      '/admin/queues/static/../api/queues',
    ];
    const answers = await Promise.all(
      variants.map(async (path) => ({ path, status: (await t.http.get(path)).status })),
    );
    // Listed by path so a failure names the spelling that got through.
    expect(answers.filter((a) => a.status !== 401 && a.status !== 404)).toEqual([]);
    expect(answers.find((a) => a.path === '/ADMIN/QUEUES')?.status).toBe(401);
  });

  it('lists every queue, and a dispatched run shows up as a waiting job in the runs queue', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'visible on the board', true);
    const res = await t.http
      .get('/admin/queues/api/queues')
      .query({ activeQueue: RUNS_QUEUE, status: 'waiting' })
      .set(good);
    expect(res.status).toBe(200);
    const queues = res.body.queues as Array<{ name: string; jobs: Array<{ data: { runId: string } }> }>;
    expect(queues.map((q) => q.name).sort()).toEqual([...ALL_QUEUES].sort());
    const runs = queues.find((q) => q.name === RUNS_QUEUE)!;
    expect(runs.jobs.map((j) => j.data.runId)).toContain(run.id);
  });

  it('refuses a state-changing request sent by another site through the operator browser', async () => {
    const path = '/admin/queues/api/queues/notifications/retry/failed';
    const crossSite = await t.http.put(path).set(good).set('Sec-Fetch-Site', 'cross-site');
    expect(crossSite.status).toBe(403);
    // A browser sends Origin with every PUT; the origin check (admin-headers) needs it.
    const own = { Host: 'board.example', Origin: 'http://board.example' };
    const sameOrigin = await t.http.put(path).set(good).set('Sec-Fetch-Site', 'same-origin').set(own);
    expect(sameOrigin.status).toBe(200);
  });
});

describe('admin dashboard without ADMIN_USER/ADMIN_PASSWORD', () => {
  it('answers 503 "admin dashboard not configured" on every path, whatever is sent', async () => {
    const t = await startApp(env('admin-off', {}));
    try {
      for (const path of SUB_PATHS) {
        for (const headers of [{}, basic('', ''), basic(USER, PASSWORD)]) {
          const res = await t.http.get(path).set(headers);
          expect(res.status).toBe(503);
          expect(res.body).toEqual({
            statusCode: 503,
            error: 'Service Unavailable',
            message: 'admin dashboard not configured',
          });
        }
      }
    } finally {
      await t.close();
    }
  });
});

describe('admin dashboard in a process that does not serve the API', () => {
  it('is not mounted: only api and all serve it', async () => {
    // The scheduler role stands in for every non-API role (AdminModule.register checks roleServesApi).
    const t = await startApp(
      env('admin-scheduler', { APP_ROLE: 'scheduler', ADMIN_USER: USER, ADMIN_PASSWORD: PASSWORD }),
    );
    try {
      const res = await t.http.get('/admin/queues').set(good);
      expect(res.status).toBe(404);
    } finally {
      await t.close();
    }
  });
});

describe('admin credentials in the logs', () => {
  it('never appear, whatever is sent, even at trace level', async () => {
    // A real process: pino writes straight to fd 1, which only a parent process can read.
    const env = testEnv('admin-logs', `${tempDir('admin-logs')}/executions.log`, {
      ADMIN_USER: USER,
      ADMIN_PASSWORD: PASSWORD,
      LOG_LEVEL: 'trace',
    });
    const proc = await startProcess(env, 'api');
    const wrong = basic(USER, 'guessed-password-42');
    try {
      for (const headers of [good, wrong, {}]) {
        for (const path of ['/admin/queues', '/admin/queues/api/queues'])
          await fetch(`http://127.0.0.1:${proc.port}${path}`, { headers });
      }
      // Proves the requests were logged at all, so the checks below are not vacuous.
      await waitFor(
        () => (proc.output().match(/\/admin\/queues/g) ?? []).length >= 6,
        10_000,
        'admin requests in the log',
      );
    } finally {
      await proc.stop();
    }
    const out = proc.output();
    for (const secret of [
      PASSWORD,
      good.Authorization.slice('Basic '.length),
      wrong.Authorization.slice('Basic '.length),
      'guessed-password-42',
    ]) {
      expect(out).not.toContain(secret);
    }
  });
});
