import { AddressInfo, createConnection, createServer, Server, Socket } from 'node:net';

export type ProxyMode = 'pass' | 'cut' | 'hang' | 'hang-new';

/**
 * A TCP proxy in front of a real service (Postgres, Redis) that a test can take away:
 * - `cut()`: every open connection is reset and new ones are reset at once (the service is down,
 *   or restarting);
 * - `hang()`: open connections are reset and new ones are accepted but never answered (a network
 *   that drops packets: the client waits for its own connect timeout);
 * - `hangNew()`: open connections go on; new ones are accepted but never answered (a client's
 *   second connection that cannot come up);
 * - `restore()`: connections pass through again.
 */
export class TcpProxy {
  private server?: Server;
  /** The port the proxy listens on (0 until started). */
  port = 0;
  private mode: ProxyMode = 'pass';
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** A proxy for the service behind `serviceUrl` (postgres://… or redis://…). */
  static for(serviceUrl: string, defaultPort: number): TcpProxy {
    const u = new URL(serviceUrl);
    return new TcpProxy(u.hostname, Number(u.port || defaultPort));
  }

  async start(): Promise<this> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** `serviceUrl` with its host and port replaced by the proxy's. */
  url(serviceUrl: string): string {
    const u = new URL(serviceUrl);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  cut(): void {
    this.mode = 'cut';
    this.dropAll();
  }

  hang(): void {
    this.mode = 'hang';
    this.dropAll();
  }

  hangNew(): void {
    this.mode = 'hang-new';
  }

  restore(): void {
    this.mode = 'pass';
  }

  async stop(): Promise<void> {
    this.dropAll();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  private dropAll(): void {
    for (const s of this.sockets) s.resetAndDestroy();
    this.sockets.clear();
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'cut') return void client.resetAndDestroy();
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    if (this.mode === 'hang' || this.mode === 'hang-new') return;
    const upstream = createConnection(this.targetPort, this.targetHost);
    this.sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
