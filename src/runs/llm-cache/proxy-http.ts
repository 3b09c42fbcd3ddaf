import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FlightHead } from './flight';

/** The proxy's HTTP plumbing: which upstream a path maps to, which headers pass, bodies and errors. */

/** Headers that belong to one connection, not to the request or answer (RFC 9110 §7.6.1), and ours. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'accept-encoding',
]);

/**
 * The upstream URL for a proxy path, or undefined when the path could leave the configured base
 * (`..` segments, encoded or not, another host): only the configured upstreams are ever contacted.
 */
export function upstreamUrl(base: string, rest: string): { url: URL; path: string } | undefined {
  if (!rest.startsWith('/') || rest.includes('\\') || rest.startsWith('//')) return undefined;
  const q = rest.indexOf('?');
  const path = q === -1 ? rest : rest.slice(0, q);
  // Encoded dots and slashes could be decoded into `..` by a server behind the upstream.
  if (/%2e|%2f|%5c/i.test(path)) return undefined;
  let url: URL;
  try {
    url = new URL(base + rest);
  } catch {
    return undefined;
  }
  const b = new URL(base);
  const prefix = b.pathname.replace(/\/+$/, '');
  if (url.origin !== b.origin || (prefix && url.pathname !== prefix && !url.pathname.startsWith(`${prefix}/`)))
    return undefined;
  if (url.pathname !== `${prefix}${path}`) return undefined; // the URL parser rewrote it (dot segments)
  return { url, path };
}

export function answerHeaders(h: FlightHead): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(h.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'set-cookie') continue;
    out[name] = value;
  }
  return out;
}

export function encoded(h: FlightHead): boolean {
  const enc = headerString(h.headers['content-encoding']);
  return !!enc && enc !== 'identity';
}

export function headerString(v: string | string[] | undefined): string | null {
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}

export function readBody(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > limit) over = true;
      else chunks.push(c);
    });
    req.once('end', () => resolve(over ? undefined : Buffer.concat(chunks, n)));
    req.once('error', reject);
  });
}

export function fail(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const json = JSON.stringify({ error: { message, type: 'onceflow_error' } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
}
