import { signPlaneBody, verifyPlaneSignature } from './plane-signature';

const SECRET = 'plane_wh_0123456789abcdef0123456789abcdef';
const OTHER = 'plane_wh_fedcba9876543210fedcba9876543210';
const body = Buffer.from('{"event": "issue", "action": "created", "data": {"id": "x", "name": "Caf\\u00e9"}}');

describe('verifyPlaneSignature', () => {
  const good = signPlaneBody(body, SECRET);

  it('accepts the HMAC of the raw bytes under any configured secret', () => {
    expect(verifyPlaneSignature(body, good, [SECRET])).toBe(true);
    expect(verifyPlaneSignature(body, good, [OTHER, SECRET])).toBe(true);
    expect(verifyPlaneSignature(body, good.toUpperCase(), [SECRET])).toBe(true);
  });

  it('rejects the right digest with anything after it (hex decoding would stop there and compare equal)', () => {
    expect(verifyPlaneSignature(body, `${good}0`, [SECRET])).toBe(false);
    expect(verifyPlaneSignature(body, `${good}zz`, [SECRET])).toBe(false);
    expect(verifyPlaneSignature(body, ` ${good}`, [SECRET])).toBe(false);
  });

  it('rejects a signature over re-serialised JSON (Node writes no spaces, no \\u escapes)', () => {
    const reserialised = Buffer.from(JSON.stringify(JSON.parse(body.toString())));
    expect(reserialised.equals(body)).toBe(false);
    expect(verifyPlaneSignature(reserialised, good, [SECRET])).toBe(false);
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['short', 'abcdef'],
    ['one char short', 'a'.repeat(63)],
    ['one char long', 'a'.repeat(65)],
    ['non-hex of the right length', 'z'.repeat(64)],
    ['sha256= prefixed', `sha256=${signPlaneBody(body, SECRET)}`],
    ['repeated header', ['a', 'b']],
  ])('rejects a %s signature without throwing', (_name, sig) => {
    expect(verifyPlaneSignature(body, sig, [SECRET])).toBe(false);
  });

  it('rejects a wrong secret, and everything when no secret is configured', () => {
    expect(verifyPlaneSignature(body, good, [OTHER])).toBe(false);
    expect(verifyPlaneSignature(body, good, [])).toBe(false);
  });
});
