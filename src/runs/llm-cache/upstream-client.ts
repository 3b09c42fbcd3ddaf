import { Logger } from '@nestjs/common';
import {
  Agent as HttpAgent,
  ClientRequest,
  IncomingMessage,
  OutgoingHttpHeaders,
  request as httpRequest,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { HOP_BY_HOP } from './proxy-http';

/** An upstream silent for this long is given up (streamed answers send something every few seconds). */
const UPSTREAM_IDLE_MS = 10 * 60_000;

/** The LLM proxy's connections to the configured upstreams: pooled, and one resend for a dead one. */
export class UpstreamClient {
  private readonly logger = new Logger(UpstreamClient.name);
  private readonly httpAgent = new HttpAgent({ keepAlive: true });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true });

  /**
   * Sends the request upstream; `onError` gets any failure before or during the answer's head.
   * A pooled connection the upstream closed while it sat idle fails with ECONNRESET before any
   * answer: its close and our reuse crossed, and the request met a dead connection. That one is
   * sent once more, on a connection of its own (the pattern Node's http docs give for
   * `reusedSocket`); without it the command got a 502 for a call the upstream never saw.
   */
  send(
    req: IncomingMessage,
    url: URL,
    body: Buffer,
    onResponse: (res: IncomingMessage) => void,
    onError: (err: Error) => void,
  ): { destroy(): void } {
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith('x-onceflow')) continue;
      headers[name] = value;
    }
    // Identity: the answer is stored and replayed as the bytes it is, with its content-type only.
    headers['accept-encoding'] = 'identity';
    if (body.length || req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH')
      headers['content-length'] = body.length;
    const tls = url.protocol === 'https:';
    let current: ClientRequest;
    const attempt = (pooled: boolean) => {
      // A retry gets a connection of its own (agent false): the pool may hold more dead ones.
      const options = { method: req.method, headers, timeout: UPSTREAM_IDLE_MS };
      const agent = pooled ? (tls ? this.httpsAgent : this.httpAgent) : false;
      let answered = false;
      const up = (tls ? httpsRequest : httpRequest)(url, { ...options, agent }, (upRes) => {
        answered = true;
        onResponse(upRes);
      });
      up.once('timeout', () => up.destroy(new Error(`no answer from the upstream for ${UPSTREAM_IDLE_MS / 1000} s`)));
      up.once('error', (err: NodeJS.ErrnoException) => {
        if (pooled && !answered && up.reusedSocket && err.code === 'ECONNRESET') {
          this.logger.warn({
            msg: 'LLM upstream had closed a pooled connection; sending again on a new one',
            url: url.origin,
          });
          return attempt(false);
        }
        onError(err);
      });
      up.end(body);
      current = up;
    };
    attempt(true);
    return { destroy: () => current.destroy() };
  }
}
