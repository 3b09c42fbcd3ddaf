import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SlackClient } from './slack.client';

/** Against a real local HTTP server: what each answer of Slack's becomes. */
describe('SlackClient', () => {
  let server: Server;
  let handler: (req: IncomingMessage, res: ServerResponse, body: string) => void;
  let base: string;
  const secretPath = '/services/T000/B000/XXXXsecretXXXX';

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => handler(req, res, body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const client = (timeoutMs?: number) => new SlackClient(`${base}${secretPath}`, timeoutMs);
  const answer = (status: number, body = '', headers: Record<string, string> = {}) => {
    handler = (_req, res) => {
      res.writeHead(status, headers);
      res.end(body);
    };
  };

  it('posts incoming-webhook JSON and treats a 200 as delivered', async () => {
    let seen: { method?: string; url?: string; type?: string; body?: unknown } = {};
    handler = (req, res, body) => {
      seen = { method: req.method, url: req.url, type: req.headers['content-type'], body: JSON.parse(body) };
      res.end('ok');
    };
    const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: 'hi' } }];
    await expect(client().post({ text: 'hello', blocks })).resolves.toEqual({ kind: 'ok' });
    expect(seen).toEqual({
      method: 'POST',
      url: secretPath,
      type: 'application/json',
      body: { text: 'hello', blocks },
    });
  });

  it('reads Retry-After from a 429', async () => {
    answer(429, 'rate_limited', { 'retry-after': '3' });
    await expect(client().post({ text: 'x' })).resolves.toEqual({
      kind: 'transient',
      error: 'Slack answered 429: rate_limited',
      retryAfterMs: 3000,
    });
  });

  it('retries 5xx and 408, gives up on other 4xx', async () => {
    answer(500, 'boom');
    await expect(client().post({ text: 'x' })).resolves.toMatchObject({
      kind: 'transient',
      error: 'Slack answered 500: boom',
    });
    answer(408);
    await expect(client().post({ text: 'x' })).resolves.toMatchObject({ kind: 'transient' });
    answer(404, 'no_service');
    await expect(client().post({ text: 'x' })).resolves.toEqual({
      kind: 'permanent',
      error: 'Slack answered 404: no_service',
    });
  });

  it('times out a silent Slack as a transient failure', async () => {
    handler = () => undefined; // never answers
    await expect(client(200).post({ text: 'x' })).resolves.toEqual({
      kind: 'transient',
      error: 'Slack did not answer within 200 ms',
    });
  });

  it("reports the caller's abort as such, not as a failure", async () => {
    handler = () => undefined;
    const ctl = new AbortController();
    const pending = client().post({ text: 'x' }, ctl.signal);
    setTimeout(() => ctl.abort(), 50);
    await expect(pending).resolves.toEqual({ kind: 'aborted' });
  });

  it('writes nothing when MayWrite says no once the connection is up, and says so', async () => {
    let received = 0;
    handler = (_req, res) => {
      received++;
      res.end('ok');
    };
    let asked = 0;
    const refused = await client().post({ text: 'x' }, undefined, () => {
      asked++;
      return false;
    });
    expect(refused).toEqual({ kind: 'aborted', unwritten: true });
    expect(asked).toBe(1);
    // The next request, allowed, goes through: the refused one left nothing behind.
    expect(await client().post({ text: 'y' }, undefined, () => true)).toEqual({ kind: 'ok' });
    expect(received).toBe(1);
  });

  it('never lets the webhook URL into an error', async () => {
    answer(400, `invalid_payload at ${base}${secretPath}`);
    const echoed = await client().post({ text: 'x' });
    expect(JSON.stringify(echoed)).not.toContain('secret');
    const refused = await new SlackClient(`http://127.0.0.1:1${secretPath}`).post({ text: 'x' });
    expect(refused).toMatchObject({ kind: 'transient' });
    expect(JSON.stringify(refused)).not.toContain('secret');
  });

  it('does nothing without a URL', async () => {
    await expect(new SlackClient(undefined).post({ text: 'x' })).resolves.toEqual({
      kind: 'permanent',
      error: 'SLACK_WEBHOOK_URL is not set',
    });
  });
});
