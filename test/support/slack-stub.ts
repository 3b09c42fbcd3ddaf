import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the stub answers one request; `hold` keeps it open until the test releases it (or the client goes). */
export interface StubReply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  hold?: boolean;
}

export interface StubRequest {
  text: string;
  body: unknown;
  /** Date.now() when the stub had the whole request. */
  receivedAt: number;
  /** held: open, not answered yet; answered: a reply was written in full; aborted: the client went away first. */
  state: 'held' | 'answered' | 'aborted';
  status?: number;
  /** Date.now() when the answer was handed to the socket. */
  answeredAt?: number;
  /** The sender's TCP port, and the process that held that connection (when the stub was asked to find it). */
  remotePort?: number;
  poster?: number;
  release(reply?: StubReply): void;
}

export interface StubOptions {
  /** Finds the process holding a client connection, from its port (called once per connection, while it is open). */
  identify?: (remotePort: number, localPort: number) => number | undefined;
}

/**
 * A stand-in Slack incoming webhook: the outside witness of what was delivered. A message counts
 * as delivered only when the stub ANSWERED it 200 in full; a request whose client vanished while
 * it was held (a killed worker) is "aborted", never delivered. Replies are scripted per key (a
 * run id found in the message text), so tests sharing one stub do not disturb each other.
 */
export class SlackStub {
  readonly requests: StubRequest[] = [];
  private readonly plans = new Map<string, StubReply[]>();
  private readonly posters = new WeakMap<object, number | undefined>();
  private readonly secretPath = `/services/T0ONCEFLOW/B0TEST/${Math.random().toString(36).slice(2)}`;

  private constructor(private readonly server: Server) {}

  static async start(opts: StubOptions = {}): Promise<SlackStub> {
    const server = createServer();
    const stub = new SlackStub(server);
    const identify = opts.identify;
    if (identify)
      server.on('connection', (socket) =>
        stub.posters.set(socket, identify(socket.remotePort ?? 0, socket.localPort ?? 0)),
      );
    server.on('request', (req, res) => void stub.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return stub;
  }

  /** The webhook URL, with a secret-looking path that must never show up in logs or rows. */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${this.secretPath}`;
  }

  get secret(): string {
    return this.secretPath;
  }

  /** Replies for the next requests whose text contains `key`, in order; after them, 200 "ok". */
  plan(key: string, ...replies: StubReply[]): void {
    this.plans.set(key, [...(this.plans.get(key) ?? []), ...replies]);
  }

  for(key?: string): StubRequest[] {
    return key === undefined ? this.requests : this.requests.filter((r) => r.text.includes(key));
  }

  /** Messages answered 200 in full (optionally only those mentioning `key`). */
  delivered(key?: string): number {
    return this.for(key).filter((r) => r.state === 'answered' && r.status === 200).length;
  }

  held(key?: string): StubRequest[] {
    return this.for(key).filter((r) => r.state === 'held');
  }

  async close(): Promise<void> {
    for (const r of this.held()) r.release({ status: 503 });
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: unknown = null;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = null;
    }
    const text = typeof (body as { text?: unknown })?.text === 'string' ? (body as { text: string }).text : '';
    const entry: StubRequest = {
      text,
      body,
      receivedAt: Date.now(),
      state: 'held',
      remotePort: req.socket.remotePort,
      poster: this.posters.get(req.socket),
      release: () => undefined,
    };
    this.requests.push(entry);
    const answer = (reply: StubReply = {}): void => {
      if (entry.state !== 'held') return;
      const status = reply.status ?? 200;
      res.on('finish', () => {
        entry.state = 'answered';
        entry.status = status;
        entry.answeredAt = Date.now();
      });
      res.writeHead(status, { 'content-type': 'text/plain', ...reply.headers });
      res.end(reply.body ?? (status === 200 ? 'ok' : 'stub_error'));
    };
    res.on('close', () => {
      if (!res.writableFinished) entry.state = 'aborted';
    });
    entry.release = answer;
    if (req.method !== 'POST' || req.url !== this.secretPath || body === null || !text)
      return answer({ status: 400, body: 'invalid_payload' });
    const key = [...this.plans.keys()].find((k) => text.includes(k));
    const reply = key ? this.plans.get(key)!.shift() : undefined;
    if (key && this.plans.get(key)!.length === 0) this.plans.delete(key);
    if (!reply?.hold) answer(reply);
  }
}
