import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { signPlaneBody } from '../src/webhooks/plane-signature';
import { closeDb, startApp, TestApp } from './support/app';
import { API_KEY, tempDir, testEnv } from './support/env';

/**
 * Auth on every non-public route. The routes come from the running app (Express's router, plus the
 * OpenAPI document), not from a hand-kept list, so a new controller is covered the day it lands;
 * a route that is neither under /api nor on the public list below fails the test until someone
 * decides which it is.
 */
const PLANE_SECRET = 'plane-secret-for-auth-test';
const ADMIN = { user: 'ops', password: 'admin-pass-0123456789' };
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

// Public by design: probes and scrapes carry no credentials; Plane's HMAC signature is the
// webhook's credential; the OpenAPI UI documents the API and holds no data.
const PUBLIC = [
  'GET /health/live',
  'GET /health/ready',
  'GET /metrics',
  'POST /webhooks/plane',
  'GET /docs',
  'GET /docs/',
  'GET /docs/index.html',
  'GET /docs/LICENSE',
  'GET /docs/swagger-ui-init.js',
  'GET /docs/docs/swagger-ui-init.js',
  'GET /docs-json',
  'GET /docs-yaml',
];

// The contract's routes: the discovered list must hold them, or discovery itself is broken.
const CONTRACT_API = [
  'POST /api/projects',
  'GET /api/projects',
  'GET /api/projects/:id',
  'POST /api/projects/:id/runs',
  'GET /api/runs',
  'GET /api/runs/:id',
  'GET /api/runs/:id/events',
  'POST /api/runs/dispatch',
  'POST /api/runs/:id/dispatch',
  'POST /api/runs/:id/retry',
  'POST /api/runs/:id/cancel',
  'GET /api/tasks',
  'GET /api/tasks/:id',
  'GET /api/notifications',
  'GET /api/webhook-deliveries',
  'POST /api/webhook-deliveries/:id/replay',
];

const WRONG_BEARER: Array<[string, Record<string, string>]> = [
  ['no Authorization header', {}],
  ['a wrong bearer token', { Authorization: 'Bearer wrong-token-0123456789abcdef' }],
  ['the key with a suffix', { Authorization: `Bearer ${API_KEY}x` }],
  ['the key cut short', { Authorization: `Bearer ${API_KEY.slice(0, -1)}` }],
  ['the key without a scheme', { Authorization: API_KEY }],
  ['the key as basic auth', { Authorization: basic(API_KEY, '') }],
  ['an empty bearer', { Authorization: 'Bearer ' }],
];

interface ExpressLayer {
  route?: { path: string; methods: Record<string, boolean> };
}

/** "METHOD /path" for every endpoint Express serves. Catch-all routes (`{/*splat}`, all methods) are
 * middleware that Nest mounts through the router (nestjs-pino's request logger), not endpoints. */
function routerRoutes(t: TestApp): string[] {
  const stack = (t.app.getHttpAdapter().getInstance() as { router: { stack: ExpressLayer[] } }).router.stack;
  return stack
    .filter((l) => l.route && !l.route.path.includes('*'))
    .flatMap((l) => Object.keys(l.route!.methods).map((m) => `${m.toUpperCase()} ${l.route!.path}`));
}

async function openApiRoutes(t: TestApp): Promise<string[]> {
  const doc = await t.http.get('/docs-json');
  expect(doc.status).toBe(200);
  return Object.entries(doc.body.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
  );
}

function call(t: TestApp, route: string, headers: Record<string, string>) {
  const [method, path] = route.split(' ');
  const url = path.replace(/:\w+/g, randomUUID());
  const req = t.http[method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete'](url).set(headers);
  return method === 'GET' || method === 'HEAD' ? req : req.send({});
}

describe('auth on every non-public route', () => {
  let t: TestApp;
  let apiRoutes: string[];
  let allRoutes: string[];

  beforeAll(async () => {
    t = await startApp(
      testEnv('auth', join(tempDir('auth'), 'executions.log'), {
        APP_ROLE: 'api',
        ADMIN_USER: ADMIN.user,
        ADMIN_PASSWORD: ADMIN.password,
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      }),
    );
    allRoutes = [...new Set([...routerRoutes(t), ...(await openApiRoutes(t))])].sort();
    apiRoutes = allRoutes.filter((r) => r.split(' ')[1].startsWith('/api/'));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it('finds every contract route, and every route is either under /api or public', () => {
    expect(apiRoutes).toEqual(expect.arrayContaining(CONTRACT_API));
    expect(allRoutes.filter((r) => !apiRoutes.includes(r) && !PUBLIC.includes(r))).toEqual([]);
  });

  it.each(WRONG_BEARER)('every /api route answers 401 to %s', async (_name, headers) => {
    const answers = await Promise.all(apiRoutes.map(async (route) => ({ route, res: await call(t, route, headers) })));
    // Listed by route so a failure names the unguarded one.
    expect(answers.filter((a) => a.res.status !== 401).map((a) => `${a.route} -> ${a.res.status}`)).toEqual([]);
    for (const { res } of answers) expect(res.body).toMatchObject({ statusCode: 401, error: 'Unauthorized' });
  });

  it('lets the right key through on every /api route (so the 401s above are about the token)', async () => {
    for (const headers of [{ Authorization: `Bearer ${API_KEY}` }, { Authorization: `bearer ${API_KEY}` }]) {
      const answers = await Promise.all(
        apiRoutes.map(async (route) => ({ route, status: (await call(t, route, headers)).status })),
      );
      expect(answers.filter((a) => a.status === 401 || a.status >= 500)).toEqual([]);
    }
  });

  it('answers 401 on /admin/queues without or with wrong basic auth, 200 with the right one', async () => {
    for (const authorization of [
      undefined,
      basic(ADMIN.user, 'nope'),
      basic('nope', ADMIN.password),
      `Bearer ${API_KEY}`,
    ]) {
      const res = await t.http.get('/admin/queues').set(authorization ? { Authorization: authorization } : {});
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Basic realm="onceflow"');
    }
    const ok = await t.http.get('/admin/queues').set({ Authorization: basic(ADMIN.user, ADMIN.password) });
    expect(ok.status).toBe(200);
  });

  it.each(['/health/live', '/health/ready', '/metrics'])('%s needs no credentials', async (path) => {
    const res = await t.http.get(path);
    expect(res.status).toBe(200);
  });

  it('/webhooks/plane needs no bearer token: the signature is the credential', async () => {
    // An event we do not act on: accepted and ignored, nothing created.
    const body = JSON.stringify({
      event: 'cycle',
      action: 'created',
      webhook_id: randomUUID(),
      data: { id: randomUUID() },
    });
    for (const headers of [{}, { Authorization: 'Bearer wrong-token-0123456789abcdef' }]) {
      const res = await t.http
        .post('/webhooks/plane')
        .set({ 'Content-Type': 'application/json', 'X-Plane-Signature': signPlaneBody(body, PLANE_SECRET), ...headers })
        .send(body);
      expect(res.status).not.toBe(401);
      expect(res.status).toBeLessThan(300);
    }
  });
});
