import { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';
import { OnceflowExpressAdapter } from '../src/http/express-adapter';
import { auth, closeDb, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { deliver, newWorkItem, PLANE_SECRET, v1Body } from './support/plane';

const USER = 'ops';
const PASSWORD = 'board-pass-0123456789';

/**
 * Express gives every request its methods with `Object.setPrototypeOf(req, app.request)` (and the
 * same for the response). On a plain Node object that changes its hidden class, which makes V8
 * allocate more per request and promote much of it, and the old space's mark-compacts then stall
 * the API (src/http/express-adapter.ts). Our server creates requests and responses that already
 * have the app's prototypes, so none of those calls may change a prototype, while everything
 * Express and a mounted sub-app (Bull Board) do with them keeps working.
 */
describe("requests are born with the Express app's prototypes", () => {
  let t: TestApp;
  let express: Express;
  /** Calls of Object.setPrototypeOf on a request or response that did change its prototype. */
  let changed: string[];
  let spy: jest.SpyInstance;

  beforeAll(async () => {
    const tag = 'express-prototypes';
    t = await startApp(
      testEnv(tag, `${tempDir(tag)}/executions.log`, {
        APP_ROLE: 'api',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
        ADMIN_USER: USER,
        ADMIN_PASSWORD: PASSWORD,
      }),
    );
    express = t.app.getHttpAdapter().getInstance() as Express;
  });
  beforeEach(() => {
    changed = [];
    const original = Object.setPrototypeOf;
    spy = jest.spyOn(Object, 'setPrototypeOf').mockImplementation((o: object, proto: object | null) => {
      if ((o instanceof IncomingMessage || o instanceof ServerResponse) && Object.getPrototypeOf(o) !== proto) {
        changed.push(o instanceof IncomingMessage ? 'request' : 'response');
      }
      return original(o, proto);
    });
  });
  afterEach(() => spy.mockRestore());
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it("the API's routes, a Plane delivery and a 404 change no prototype, and Express still serves them", async () => {
    const runs = await t.http.get('/api/runs').set(auth);
    expect(runs.status).toBe(200);
    expect(runs.headers['content-type']).toMatch(/^application\/json/);
    const body = v1Body(newWorkItem({ name: 'Born with its prototype' }), 'created');
    const first = await deliver(t, body);
    expect(first.status).toBe(202);
    expect((await deliver(t, body)).status).toBe(200); // the retry: answered as a duplicate
    expect((await t.http.get('/no-such-route').set(auth)).status).toBe(404);
    // Express did call setPrototypeOf on each of them (the spy saw it); none of the calls changed one.
    expect(spy.mock.calls.length).toBeGreaterThanOrEqual(8);
    expect(changed).toEqual([]);
  });

  it("a request and its response have the app's own prototypes from the start", async () => {
    let seen: [boolean, boolean] | undefined;
    const server = t.app.getHttpServer() as import('node:http').Server;
    const look = (req: IncomingMessage, res: ServerResponse) => {
      // Runs before Express's listener: what Node created, before Express touched it.
      seen = [Object.getPrototypeOf(req) === express.request, Object.getPrototypeOf(res) === express.response];
    };
    server.prependListener('request', look);
    try {
      expect((await t.http.get('/health/live')).status).toBe(200);
    } finally {
      server.off('request', look);
    }
    expect(seen).toEqual([true, true]);
  });

  it('Bull Board, a mounted sub-app, still swaps in its own prototypes and serves its API', async () => {
    const basic = { Authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` };
    const res = await t.http.get('/admin/queues/api/queues').set(basic);
    expect(res.status).toBe(200);
    expect(res.body).toHaveProperty('queues');
    // Into the board's own prototypes: the only change (the board answers, so Express's restore,
    // which runs only when a sub-app passes a request on, has nothing to do).
    expect(changed).toEqual(['request', 'response']);
    expect((await t.http.get('/api/runs').set(auth)).status).toBe(200);
  });

  it('refuses the server options it does not implement instead of dropping them', () => {
    const adapter = new OnceflowExpressAdapter();
    expect(() => adapter.initHttpServer({ httpsOptions: { key: 'k', cert: 'c' } })).toThrow(/httpsOptions/);
    expect(() => adapter.initHttpServer({ forceCloseConnections: true })).toThrow(/forceCloseConnections/);
    expect(() => adapter.initHttpServer({ return503OnClosing: true })).toThrow(/return503OnClosing/);
  });
});
