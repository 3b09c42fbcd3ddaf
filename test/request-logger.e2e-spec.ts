import { AsyncLocalStorage } from 'node:async_hooks';
import { auth, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';

/**
 * The request logger binds each request's logger in an AsyncLocalStorage; the first time one is
 * entered, Node switches on its async hooks for every promise of the process, for good. A role
 * without the API (a worker) serves only probes and scrapes, which are not logged: serving them
 * must not switch the hooks on. The API still binds every request it logs.
 */
describe('request logger per role', () => {
  const entered = () => {
    const run = jest.spyOn(AsyncLocalStorage.prototype, 'run');
    const enterWith = jest.spyOn(AsyncLocalStorage.prototype, 'enterWith');
    return () => {
      const n = run.mock.calls.length + enterWith.mock.calls.length;
      run.mockRestore();
      enterWith.mockRestore();
      return n;
    };
  };

  async function serve(role: string, paths: string[]): Promise<number> {
    const t: TestApp = await startApp(
      testEnv(`logger-${role}`, `${tempDir(`logger-${role}`)}/executions.log`, { APP_ROLE: role }),
    );
    try {
      const done = entered();
      for (const path of paths) await t.http.get(path).set(auth);
      return done();
    } finally {
      await t.close();
    }
  }

  it('a worker answers its probes and scrapes without entering an AsyncLocalStorage', async () => {
    expect(await serve('worker', ['/health/live', '/health/ready', '/metrics', '/no-such-route'])).toBe(0);
  });

  it('the API binds the request logger of the requests it serves', async () => {
    expect(await serve('api', ['/api/runs', '/health/live'])).toBeGreaterThan(0);
  });
});
