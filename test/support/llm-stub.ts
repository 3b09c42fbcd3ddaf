import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LlmCall {
  provider: 'openai' | 'anthropic';
  path: string;
  authorization: string | undefined;
  apiKey: string | undefined;
  body: Record<string, unknown>;
  at: number;
}

/**
 * A stand-in LLM provider: the outside witness of how many calls reached "OpenAI" or "Anthropic".
 * It answers `/v1/chat/completions` (OpenAI shape) and `/v1/messages` (Anthropic shape), as JSON or
 * — with `"stream": true` — as server-sent events sent in several pieces; every answer carries a
 * serial number, so a replayed answer is told apart from a fresh one. `delayMs` holds each answer
 * (to overlap identical requests); `failNext` scripts error statuses; a numeric `pad` in the body
 * makes the answer that many bytes longer.
 */
export class LlmStub {
  readonly calls: LlmCall[] = [];
  delayMs = 0;
  private serial = 0;
  private failures: number[] = [];
  private resetReused = 0;
  /** Requests cut this way so far (see resetReusedNext). */
  resets = 0;
  private readonly served = new WeakMap<object, number>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<LlmStub> {
    const server = createServer();
    const stub = new LlmStub(server);
    server.on('request', (req, res) => void stub.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return stub;
  }

  /** LLM_OPENAI_UPSTREAM for the app (the OpenAI base URL includes /v1). */
  get openaiUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  /** LLM_ANTHROPIC_UPSTREAM (Anthropic's SDKs add /v1/messages themselves). */
  get anthropicUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  failNext(status: number, times = 1): void {
    for (let i = 0; i < times; i++) this.failures.push(status);
  }

  /**
   * The next request that comes on a connection which already served one is not read: the
   * connection is destroyed, as an idle connection the provider closed just as it was reused.
   */
  resetReusedNext(): void {
    this.resetReused++;
  }

  count(provider?: LlmCall['provider']): number {
    return this.calls.filter((c) => !provider || c.provider === provider).length;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const served = (this.served.get(req.socket) ?? 0) + 1;
    this.served.set(req.socket, served);
    if (served > 1 && this.resetReused > 0) {
      this.resetReused--;
      this.resets++;
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      /* recorded as an empty body */
    }
    const path = (req.url ?? '/').split('?')[0];
    const provider = path === '/v1/messages' ? 'anthropic' : 'openai';
    this.calls.push({
      provider,
      path,
      authorization: req.headers.authorization,
      apiKey: req.headers['x-api-key'] as string,
      body,
      at: Date.now(),
    });
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    const failure = this.failures.shift();
    if (failure) {
      res
        .writeHead(failure, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: `scripted ${failure}` } }));
      return;
    }
    const n = ++this.serial;
    const pad = typeof body.pad === 'number' ? 'x'.repeat(Math.min(body.pad, 1 << 20)) : '';
    const text = `answer #${n} to ${JSON.stringify(body.messages ?? body.input ?? null).slice(0, 80)}${pad}`;
    if (body.stream === true) return this.stream(res, provider, n, text);
    const json =
      provider === 'anthropic'
        ? {
            id: `msg_${n}`,
            type: 'message',
            role: 'assistant',
            content: [{ type: 'text', text }],
            stop_reason: 'end_turn',
          }
        : {
            id: `chatcmpl-${n}`,
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
          };
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${n}` }).end(JSON.stringify(json));
  }

  private async stream(res: ServerResponse, provider: LlmCall['provider'], n: number, text: string): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const words = text.split(' ');
    for (const [i, w] of words.entries()) {
      const piece =
        provider === 'anthropic'
          ? `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `${w} ` } })}\n\n`
          : `data: ${JSON.stringify({ id: `chatcmpl-${n}`, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: `${w} ` } }], i })}\n\n`;
      res.write(piece);
      await new Promise((r) => setTimeout(r, 5));
    }
    res.end(provider === 'anthropic' ? 'event: message_stop\ndata: {"type":"message_stop"}\n\n' : 'data: [DONE]\n\n');
  }
}
