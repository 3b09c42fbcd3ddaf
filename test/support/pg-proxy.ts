import { AddressInfo, createConnection, createServer, Socket } from 'node:net';

/**
 * A TCP proxy to Postgres that passes every byte at once but a close from the server `lateMs`
 * late: a terminated backend's FATAL then certainly reaches the client before its socket closes,
 * the order pg_terminate_backend produces only sometimes.
 */
export async function lateCloseProxy(target: URL, lateMs: number): Promise<{ url: string; stop: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.on('data', (d) => client.write(d));
    upstream.on('close', () => setTimeout(() => client.destroy(), lateMs));
    client.on('close', () => upstream.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target.toString());
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * The pid of the one backend of this test database inside `pg_sleep` (the statement a test is
 * about to cut), asked through `query`; fails after 2 s.
 */
export async function sleepingBackendPid(query: (sql: string) => Promise<Array<{ pid: number }>>): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const rows = await query(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`,
    );
    if (rows[0]) return rows[0].pid;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('no backend of this database was inside pg_sleep within 2 s');
}
