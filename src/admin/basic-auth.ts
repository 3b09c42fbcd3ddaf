import type { NextFunction, Request, Response } from 'express';
import { safeEqual } from '../common/safe-equal';

export const ADMIN_REALM = 'onceflow';

export interface AdminCredentials {
  user?: string;
  password?: string;
}

export type AdminAuthResult = 'ok' | 'unauthorized' | 'not_configured';

/**
 * Checks an `Authorization: Basic ...` header against the configured pair. User and password are
 * both compared (no early exit) in constant time, so timing tells neither which half was wrong
 * nor how much of it matched. The password may contain ':'; the user may not (RFC 7617).
 */
export function checkBasicAuth(header: string | undefined, creds: AdminCredentials): AdminAuthResult {
  if (!creds.user || !creds.password) return 'not_configured';
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match) return 'unauthorized';
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return 'unauthorized';
  const userOk = safeEqual(decoded.slice(0, colon), creds.user);
  const passwordOk = safeEqual(decoded.slice(colon + 1), creds.password);
  return userOk && passwordOk ? 'ok' : 'unauthorized';
}

function refuse(res: Response, statusCode: number, error: string, message: string): void {
  res.status(statusCode).json({ statusCode, error, message });
}

/**
 * Express middleware mounted together with Bull Board's router, in front of it, on the dashboard
 * path and every sub-path (API, static assets). Nothing here logs: the header carries the password.
 */
export function adminAuthMiddleware(creds: AdminCredentials) {
  return (req: Request, res: Response, next: NextFunction): void => {
    res.setHeader('Cache-Control', 'no-store');
    const result = checkBasicAuth(req.headers.authorization, creds);
    if (result === 'not_configured') {
      // Never an open dashboard: without credentials configured nobody gets in.
      return refuse(res, 503, 'Service Unavailable', 'admin dashboard not configured');
    }
    if (result === 'unauthorized') {
      res.setHeader('WWW-Authenticate', `Basic realm="${ADMIN_REALM}"`);
      return refuse(res, 401, 'Unauthorized', 'admin credentials required');
    }
    // Browsers attach cached basic-auth credentials to cross-site requests too; a page on another
    // site must not be able to retry, clean or add jobs through a logged-in operator's browser.
    if (req.method !== 'GET' && req.method !== 'HEAD' && req.headers['sec-fetch-site'] === 'cross-site') {
      return refuse(res, 403, 'Forbidden', 'cross-site request refused');
    }
    next();
  };
}
