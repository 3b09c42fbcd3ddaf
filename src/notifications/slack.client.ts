import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { parseRetryAfterMs } from './retry-backoff';

/** Slack is given this long to answer; past it the attempt counts as failed and is retried. */
export const SLACK_TIMEOUT_MS = 10_000;

/** Slack incoming-webhook JSON (https://api.slack.com/messaging/webhooks): `text` is the fallback, `blocks` optional. */
export interface SlackMessage {
  text: string;
  blocks?: unknown[];
}

export type SlackOutcome =
  /** Slack answered 2xx: the message is posted. */
  | { kind: 'ok' }
  /** Worth another attempt (5xx, 429, timeout, network); `retryAfterMs` from a 429's Retry-After. */
  | { kind: 'transient'; error: string; retryAfterMs?: number }
  /** Slack refused the message itself (4xx other than 408/429): retrying cannot help. */
  | { kind: 'permanent'; error: string }
  /**
   * The caller's signal fired (claim or lock lost): we do not know, and it is not ours to record.
   * `unwritten`: MayWrite said no, so Slack never got the request.
   */
  | { kind: 'aborted'; unwritten?: true };

/**
 * Asked right before the request's bytes are written (the connection is up): false drops the
 * request unwritten. What posts a message must still hold its claim at that moment, not only when
 * it started: a process frozen while its connection was being opened (GC, SIGSTOP) wakes with
 * its claim lapsed and maybe taken over, and only the write still lies ahead.
 */
export type MayWrite = () => boolean;

/** Bytes of an error answer kept for `last_error` (Slack's are short: `invalid_payload`, …). */
const ERROR_BODY_CHARS = 200;

/**
 * Posts to the incoming webhook with node:http(s), so the write of the request is a moment this
 * code controls (see MayWrite). One connection per message, not a keep-alive pool: a pooled
 * connection Slack closed while it sat idle fails the POST that reuses it, and messages are few. The URL is a credential (anyone holding
 * it can post to the channel), so it never appears in an error, a log line or `last_error`.
 * Redirects are not followed: a 3xx is an error answer, retried like a 5xx, and the payload never
 * goes anywhere the operator did not configure.
 */
export class SlackClient {
  constructor(
    private readonly webhookUrl: string | undefined,
    private readonly timeoutMs: number = SLACK_TIMEOUT_MS,
  ) {}

  get configured(): boolean {
    return Boolean(this.webhookUrl);
  }

  post(message: SlackMessage, signal?: AbortSignal, mayWrite?: MayWrite): Promise<SlackOutcome> {
    if (!this.webhookUrl) return Promise.resolve({ kind: 'permanent', error: 'SLACK_WEBHOOK_URL is not set' });
    const url = new URL(this.webhookUrl);
    const tls = url.protocol === 'https:';
    const body = JSON.stringify({ text: message.text, blocks: message.blocks });
    return new Promise<SlackOutcome>((resolve) => {
      const req = (tls ? httpsRequest : httpRequest)(url, {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      });
      const finish = (outcome: SlackOutcome) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const drop = (outcome: SlackOutcome) => {
        req.destroy();
        finish(outcome);
      };
      const onAbort = () => drop({ kind: 'aborted' });
      const timer = setTimeout(
        () => drop({ kind: 'transient', error: `Slack did not answer within ${this.timeoutMs} ms` }),
        this.timeoutMs,
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted) return onAbort();
      req.on('error', (err) => finish(signal?.aborted ? { kind: 'aborted' } : this.networkError(err)));
      req.on('socket', (socket) => {
        const write = () => {
          if (req.destroyed) return; // timed out or aborted while connecting
          if (mayWrite && !mayWrite()) return drop({ kind: 'aborted', unwritten: true });
          req.end(body);
        };
        socket.once(tls ? 'secureConnect' : 'connect', write);
      });
      req.on('response', (res) => {
        if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) {
          // Delivered: do not wait for the body ("ok") — every millisecond here widens the window
          // between Slack's 200 and our commit.
          res.resume();
          return finish({ kind: 'ok' });
        }
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (text.length < ERROR_BODY_CHARS * 4) text += chunk;
        });
        res.on('error', () => undefined);
        // 'close' also when the connection breaks mid-body: what arrived is what we report.
        res.on('close', () => finish(this.errorAnswer(res.statusCode ?? 0, text, res.headers['retry-after'])));
      });
    });
  }

  private errorAnswer(status: number, text: string, retryAfter: string | string[] | undefined): SlackOutcome {
    const body = this.redact(text.trim().slice(0, ERROR_BODY_CHARS));
    const error = `Slack answered ${status}${body ? `: ${body}` : ''}`;
    if (status === 429)
      return {
        kind: 'transient',
        error,
        retryAfterMs: parseRetryAfterMs(Array.isArray(retryAfter) ? retryAfter[0] : (retryAfter ?? null)),
      };
    if (status >= 400 && status < 500 && status !== 408) return { kind: 'permanent', error };
    return { kind: 'transient', error };
  }

  private networkError(err: Error & { code?: string }): SlackOutcome {
    return {
      kind: 'transient',
      error: this.redact(
        `${err.message}${err.code && !err.message.includes(err.code) ? ` (${err.code})` : ''}`.slice(0, 300),
      ),
    };
  }

  private redact(text: string): string {
    if (!this.webhookUrl) return text;
    const { pathname } = new URL(this.webhookUrl);
    let out = text.split(this.webhookUrl).join('[slack webhook url]');
    if (pathname.length > 1) out = out.split(pathname).join('[slack webhook path]');
    return out;
  }
}
