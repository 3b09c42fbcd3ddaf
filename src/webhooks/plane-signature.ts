import { createHmac, timingSafeEqual } from 'node:crypto';

/** Plane sends `hexdigest()` of HMAC-SHA256: exactly 64 hex characters, no `sha256=` prefix. */
const SIGNATURE_SHAPE = /^[0-9a-f]{64}$/i;

/**
 * True when `signature` is the HMAC-SHA256 of the raw body under ANY of `secrets` (several are
 * accepted during a rotation). The shape (and so the length) is checked before any comparison,
 * because timingSafeEqual throws on a length mismatch; every secret is compared, with no early
 * exit, so timing does not tell which secret (if any) matched.
 */
export function verifyPlaneSignature(
  rawBody: Buffer,
  signature: string | string[] | undefined,
  secrets: readonly string[],
): boolean {
  if (typeof signature !== 'string' || !SIGNATURE_SHAPE.test(signature)) return false;
  const given = Buffer.from(signature, 'hex');
  if (given.length !== 32) return false;
  let ok = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(rawBody).digest();
    ok = timingSafeEqual(expected, given) || ok;
  }
  return ok;
}

/** How Plane signs (used by tests and the bench; the receiver only verifies). */
export function signPlaneBody(body: string | Buffer, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}
