import { AddressInfo, createConnection, createServer, Server, Socket } from 'node:net';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../src/database/data-source-options';
import { isTransientDbError } from '../src/database/pg-errors';
import { testDatabaseUrl } from './support/env';
import { lateCloseProxy, sleepingBackendPid } from './support/pg-proxy';

/** The ErrorResponse Postgres sends to a backend killed by pg_terminate_backend. */
function fatal57P01(): Buffer {
  const field = (type: string, value: string) =>
    Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])]);
  const body = Buffer.concat([
    field('S', 'FATAL'),
    field('V', 'FATAL'),
    field('C', '57P01'),
    field('M', 'terminating connection due to administrator command'),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/**
 * A TCP proxy to the real Postgres. While `inject` is on, a new connection gets the server's
 * start-up messages up to its first ReadyForQuery and, in the SAME write, the FATAL a terminated
 * backend sends; then the socket closes. That is the race pg_terminate_backend hits at random
 * (test/finalize-db-drop found it), made certain.
 */
class TerminatingProxy {
  inject = false;
  injected = 0;
  private server?: Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly target: URL) {}

  async start(): Promise<number> {
    this.server = createServer((client) => this.pipe(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return (this.server!.address() as AddressInfo).port;
  }

  private pipe(client: Socket): void {
    const upstream = createConnection(Number(this.target.port || 5432), this.target.hostname);
    this.sockets.add(client).add(upstream);
    const inject = this.inject;
    let pending = Buffer.alloc(0);
    let passthrough = !inject;
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d) => {
      if (passthrough) return void client.write(d);
      // Split the server's stream into messages (type byte + int32 length) until ReadyForQuery.
      pending = Buffer.concat([pending, d]);
      let at = 0;
      while (pending.length - at >= 5) {
        const len = pending.readInt32BE(at + 1);
        if (pending.length - at < 1 + len) break;
        const type = String.fromCharCode(pending[at]);
        at += 1 + len;
        if (type === 'Z') {
          passthrough = true;
          this.injected++;
          client.end(Buffer.concat([pending.subarray(0, at), fatal57P01()]));
          upstream.destroy();
          return;
        }
      }
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

describe('a Postgres connection terminated as it is handed out', () => {
  const target = new URL(testDatabaseUrl());
  const proxy = new TerminatingProxy(target);
  let ds: DataSource;

  beforeAll(async () => {
    const port = await proxy.start();
    const url = new URL(target.toString());
    url.hostname = '127.0.0.1';
    url.port = String(port);
    ds = new DataSource({ ...dataSourceOptions(url.toString(), 6) });
    await ds.initialize();
  });
  afterAll(async () => {
    await ds?.destroy().catch(() => undefined);
    await proxy.stop();
  });

  // Without GuardedPgClient the FATAL is emitted on a client nobody listens to: an uncaught
  // exception that fails this file ("Unhandled error") and, in production, kills the worker.
  it('fails only the statements on it, with an error our retries treat as transient', async () => {
    proxy.inject = true;
    // More concurrent statements than idle clients, so the pool opens new (terminated) ones.
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => ds.query('SELECT pg_sleep(0.05)')));
    proxy.inject = false;
    expect(proxy.injected).toBeGreaterThan(0);
    const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(failures.length).toBeGreaterThan(0);
    for (const f of failures) expect(isTransientDbError(f.reason)).toBe(true);
    // Let the closes land, then the pool has thrown the dead clients away and works again.
    await new Promise((r) => setTimeout(r, 100));
    const again = await Promise.all(Array.from({ length: 6 }, () => ds.query('SELECT 1 AS one')));
    expect(again.map((rows) => rows[0].one)).toEqual([1, 1, 1, 1, 1, 1]);
  });
});

describe('a Postgres session ended while a statement runs on it', () => {
  it('is not handed to the next caller, though its socket closes later (TypeORM query)', async () => {
    const target = new URL(testDatabaseUrl());
    const proxy = await lateCloseProxy(target, 300);
    const ds = new DataSource({ ...dataSourceOptions(proxy.url, 2) });
    const observer = new DataSource({ ...dataSourceOptions(target.toString(), 1) });
    await Promise.all([ds.initialize(), observer.initialize()]);
    try {
      const sleeping = ds.query('SELECT pg_sleep(5)');
      sleeping.catch(() => undefined);
      const pid = await sleepingBackendPid((sql) => observer.query(sql));
      await observer.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(sleeping).rejects.toMatchObject({ driverError: expect.objectContaining({ code: '57P01' }) });
      // At once: pg-pool hands out the last released client first.
      const [next] = await ds.query('SELECT pg_backend_pid() AS pid');
      expect(next.pid).not.toBe(pid);
    } finally {
      await ds.destroy().catch(() => undefined);
      await observer.destroy();
      await proxy.stop();
    }
  });
});
