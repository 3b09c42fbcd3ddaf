import type { NextFunction, Request, Response } from 'express';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Where a request says it comes from: its `Origin`, else its `Referer`. Browsers send `Origin` on
 * every POST, PUT, PATCH and DELETE (fetch, XHR and forms alike), so its absence means an old
 * browser or a script; a script can add the header itself.
 */
function claimedOrigin(req: Request): URL | null {
  const raw = req.headers.origin ?? req.headers.referer;
  if (!raw || raw === 'null') return null;
  try {
    return new URL(raw);
  } catch {
    return null;
  }
}

/**
 * True when the request's Origin (else Referer) names the host the request was sent to. The
 * host is compared with its port, the default port of the origin's scheme left out on both sides;
 * a proxy in front must pass the Host header on unchanged (nginx: `proxy_set_header Host $host`).
 */
export function isSameOrigin(req: Request): boolean {
  const origin = claimedOrigin(req);
  const host = req.headers.host;
  if (!origin || !host || (origin.protocol !== 'http:' && origin.protocol !== 'https:')) return false;
  let own: string;
  try {
    own = new URL(`${origin.protocol}//${host}`).host;
  } catch {
    return false;
  }
  return origin.host === own;
}

function refuse(res: Response, message: string): void {
  res.status(403).json({ statusCode: 403, error: 'Forbidden', message });
}

/**
 * In front of everything under /admin, auth included:
 * - the dashboard may not be framed by another page (clickjacking an operator into retrying,
 *   cleaning or adding jobs): `frame-ancestors 'none'`, and X-Frame-Options for older browsers;
 * - a request that changes something must come from the dashboard's own origin. Browsers attach
 *   cached basic-auth credentials to cross-site requests, so auth alone does not stop another
 *   site from posting through a logged-in operator's browser.
 */
export function adminSecurityMiddleware() {
  return (req: Request, res: Response, next: NextFunction): void => {
    res.setHeader('Content-Security-Policy', "frame-ancestors 'none'");
    res.setHeader('X-Frame-Options', 'DENY');
    if (!SAFE_METHODS.has(req.method) && !isSameOrigin(req)) {
      return refuse(
        res,
        'a request that changes something must come from the dashboard itself (Origin or Referer of this host)',
      );
    }
    next();
  };
}
