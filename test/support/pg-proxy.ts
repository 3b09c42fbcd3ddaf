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
