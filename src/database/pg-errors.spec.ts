import { isDbUnavailableError } from './pg-errors';

const err = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});

describe('isDbUnavailableError', () => {
  it.each([
    ['connection refused', err('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['connection reset', err('read ECONNRESET', 'ECONNRESET')],
    ['a terminated backend', err('terminating connection due to administrator command', '57P01')],
    ['the server starting up', err('the database system is starting up', '57P03')],
    ['too many connections', err('sorry, too many clients already', '53300')],
    ['a connect timeout (pg)', err('Connection terminated due to connection timeout')],
    ['a pool that found no free client in time (pg-pool)', err('timeout exceeded when trying to connect')],
    ['an unreachable host', err('connect EHOSTUNREACH 10.0.0.1:5432', 'EHOSTUNREACH')],
    ['an unknown host', err('getaddrinfo ENOTFOUND db', 'ENOTFOUND')],
    ['a TypeORM error wrapping one', Object.assign(new Error('query failed'), { driverError: { code: '57P01' } })],
  ])('is true for %s', (_name, e) => {
    expect(isDbUnavailableError(e)).toBe(true);
  });

  it.each([
    ['a unique violation', err('duplicate key value violates unique constraint', '23505')],
    ['a syntax error', err('syntax error at or near "x"', '42601')],
    ['an invalid byte sequence', err('invalid byte sequence for encoding "UTF8": 0x00', '22021')],
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['not an error', 'nope'],
  ])('is false for %s', (_name, e) => {
    expect(isDbUnavailableError(e)).toBe(false);
  });
});
