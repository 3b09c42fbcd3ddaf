import type { Request } from 'express';
import { isSameOrigin } from './admin-headers';

const req = (headers: Record<string, string>) => ({ headers }) as unknown as Request;

describe('isSameOrigin (admin mutating requests)', () => {
  it.each([
    ['Origin of the same host and port', { host: 'board.example:3000', origin: 'http://board.example:3000' }],
    ['Origin over https, default port on neither side', { host: 'board.example', origin: 'https://board.example' }],
    [
      'Origin with the default port spelled out in Host',
      { host: 'board.example:443', origin: 'https://board.example' },
    ],
    ['host names in another case', { host: 'Board.Example:3000', origin: 'http://board.example:3000' }],
    [
      'no Origin, Referer of a page on the same host',
      { host: 'board.example:3000', referer: 'http://board.example:3000/admin/queues/queue/runs' },
    ],
  ])('accepts %s', (_name, headers) => {
    expect(isSameOrigin(req(headers))).toBe(true);
  });

  it.each([
    ['neither Origin nor Referer', { host: 'board.example:3000' }],
    ['another host', { host: 'board.example:3000', origin: 'http://evil.example:3000' }],
    ['another port', { host: 'board.example:3000', origin: 'http://board.example:3001' }],
    ['a host that only starts like ours', { host: 'board.example', origin: 'http://board.example.evil.example' }],
    ['Origin "null" (sandboxed frame, file:)', { host: 'board.example', origin: 'null' }],
    ['a non-web scheme', { host: 'board.example', origin: 'file://board.example' }],
    ['an unparsable Origin', { host: 'board.example', origin: 'http://' }],
    [
      'a cross-site Origin even with a same-host Referer',
      { host: 'board.example', origin: 'http://evil.example', referer: 'http://board.example/' },
    ],
    ['a Referer of another host', { host: 'board.example', referer: 'http://evil.example/board.example' }],
    ['no Host header', { origin: 'http://board.example' }],
  ])('refuses %s', (_name, headers) => {
    expect(isSameOrigin(req(headers))).toBe(false);
  });
});
