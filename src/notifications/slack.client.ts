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
  /** The caller's signal fired (claim or lock lost): we do not know, and it is not ours to record. */
  | { kind: 'aborted' };

/**
 * Posts to the incoming webhook with Node's fetch. The URL is a credential (anyone holding it can
 * post to the channel), so it never appears in an error, a log line or `last_error`.
 */
export class SlackClient {
  constructor(
    private readonly webhookUrl: string | undefined,
    private readonly timeoutMs: number = SLACK_TIMEOUT_MS,
  ) {}

  get configured(): boolean {
    return Boolean(this.webhookUrl);
  }

  async post(message: SlackMessage, signal?: AbortSignal): Promise<SlackOutcome> {
    if (!this.webhookUrl) return { kind: 'permanent', error: 'SLACK_WEBHOOK_URL is not set' };
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await fetch(this.webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: message.text, blocks: message.blocks }),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        // A redirect would send the payload somewhere the operator did not configure.
        redirect: 'error',
      });
    } catch (err) {
      if (signal?.aborted) return { kind: 'aborted' };
      if (timeout.aborted) return { kind: 'transient', error: `Slack did not answer within ${this.timeoutMs} ms` };
      return { kind: 'transient', error: this.redact(describe(err)) };
    }
    if (res.ok) {
      // Delivered: do not wait for the body ("ok") — every millisecond here widens the window
      // between Slack's 200 and our commit.
      void res.body?.cancel().catch(() => undefined);
      return { kind: 'ok' };
    }
    const body = this.redact((await res.text().catch(() => '')).trim().slice(0, 200));
    const error = `Slack answered ${res.status}${body ? `: ${body}` : ''}`;
    if (res.status === 429)
      return { kind: 'transient', error, retryAfterMs: parseRetryAfterMs(res.headers.get('retry-after')) };
    if (res.status >= 400 && res.status < 500 && res.status !== 408) return { kind: 'permanent', error };
    return { kind: 'transient', error };
  }

  private redact(text: string): string {
    if (!this.webhookUrl) return text;
    const { pathname } = new URL(this.webhookUrl);
    let out = text.split(this.webhookUrl).join('[slack webhook url]');
    if (pathname.length > 1) out = out.split(pathname).join('[slack webhook path]');
    return out;
  }
}

/** fetch() throws "fetch failed" and hides the reason (ECONNREFUSED, ENOTFOUND…) in `cause`. */
function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return `${e?.message ?? String(err)}${cause ? ` (${cause})` : ''}`.slice(0, 300);
}
