import { startProcess, waitFor, WorkerProcess } from './support/app';
import { tempDir, testDatabaseUrl, testEnv } from './support/env';
import { TcpProxy } from './support/tcp-proxy';

interface LogLine {
  level: number;
  msg?: string;
  check?: string;
  at?: string;
}

const lines = (p: WorkerProcess): LogLine[] =>
  p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
const logLines = (p: WorkerProcess, msg: string) => lines(p).filter((l) => l.msg === msg);
/**
 * The child's output reaches us asynchronously. A request logged after the probes (pino-http logs
 * every route but /health and /metrics) is a marker: once it arrived, so did every earlier line.
 */
async function logMarker(p: WorkerProcess): Promise<void> {
  const path = `/log-marker-${Date.now()}`;
  await fetch(`http://127.0.0.1:${p.port}${path}`);
  await waitFor(() => p.output().includes(path), 10_000, 'the marker request in the log');
}
/** pino levels: 40 = warn, 50 = error. */
const warnings = (p: WorkerProcess) => lines(p).filter((l) => l.level >= 40).length;

/**
 * /health/ready is unauthenticated: whoever can reach it must learn up or down per check and
 * nothing more (no hosts, ports or driver messages). The operator finds the full error in the log,
 * once per change of state, not once per probe.
 */
describe('GET /health/ready while Postgres is unreachable', () => {
  const proxy = TcpProxy.for(testDatabaseUrl(), 5432);
  let app: WorkerProcess;

  beforeAll(async () => {
    await proxy.start();
    const env = testEnv('ready', `${tempDir('ready')}/executions.log`, {
      DATABASE_URL: proxy.url(testDatabaseUrl()),
      LOG_LEVEL: 'info',
    });
    app = await startProcess(env, 'api');
  });
  afterAll(async () => {
    await app?.stop();
    await proxy.stop();
  });

  const ready = async () => {
    const res = await fetch(`http://127.0.0.1:${app.port}/health/ready`);
    return { status: res.status, text: await res.text() };
  };

  it('answers 503 with up/down per check only, and logs the full error once', async () => {
    expect((await ready()).status).toBe(200);
    await proxy.cut();
    await waitFor(async () => (await ready()).status === 503, 15_000, 'readiness to go down');
    await waitFor(
      () => logLines(app, 'readiness check is down').length > 0,
      10_000,
      'the readiness warning in the log',
    );
    const warningsBefore = warnings(app);
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await ready());
    await logMarker(app);
    // Five more failing probes add no warning or error line: the change was logged once.
    expect(warnings(app)).toBe(warningsBefore);

    for (const a of answers) {
      expect(a.status).toBe(503);
      const body = JSON.parse(a.text) as { status: string; details: Record<string, Record<string, unknown>> };
      expect(body.status).toBe('error');
      expect(body.details).toEqual({
        postgres: { status: 'down' },
        redis: { status: 'up' },
        'queue:runs': { status: 'up' },
        'queue:notifications': { status: 'up' },
      });
      for (const leak of ['127.0.0.1', String(proxy.port), 'ECONNREFUSED', 'connect', 'timed out'])
        expect(a.text).not.toContain(leak);
    }

    const down = logLines(app, 'readiness check is down');
    expect(down.map((l) => l.check)).toEqual(['postgres']);
    expect(down[0].at).toBe(`127.0.0.1:${proxy.port}`);

    await proxy.restore();
    await waitFor(async () => (await ready()).status === 200, 15_000, 'readiness to come back');
    await ready();
    await logMarker(app);
    expect(logLines(app, 'readiness check is up again').map((l) => l.check)).toEqual(['postgres']);
    expect(logLines(app, 'readiness check is down')).toHaveLength(1);
  });
});
