import { ConfigError } from '../../config/app-config';
import { lookupUser, maySwitchUsers, resolveRunIdentity } from './run-identity';

const passwd =
  'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nbuild:x:1000:1000::/home/build:/bin/sh\n';

describe('RUN_AS_USER', () => {
  it('runs commands as the unprivileged default user when the worker may switch users', () => {
    expect(resolveRunIdentity(undefined, true, passwd)).toEqual({
      kind: 'user',
      name: 'nobody',
      uid: 65534,
      gid: 65534,
    });
    expect(resolveRunIdentity('build', true, passwd)).toEqual({ kind: 'user', name: 'build', uid: 1000, gid: 1000 });
    expect(resolveRunIdentity('2000:3000', true, passwd)).toEqual({
      kind: 'user',
      name: '2000:3000',
      uid: 2000,
      gid: 3000,
    });
  });

  it('refuses to start a worker that may not switch users, unless RUN_AS_USER=same accepts the risk', () => {
    expect(() => resolveRunIdentity(undefined, false, passwd)).toThrow(ConfigError);
    expect(() => resolveRunIdentity('build', false, passwd)).toThrow(
      /may not start commands as another user.*RUN_AS_USER=same/,
    );
    expect(resolveRunIdentity('same', false, passwd)).toEqual({ kind: 'same' });
  });

  it('refuses an unknown user and root', () => {
    expect(() => resolveRunIdentity('ghost', true, passwd)).toThrow(/no such user/);
    expect(() => resolveRunIdentity('root', true, passwd)).toThrow(/is root/);
    expect(() => resolveRunIdentity('0:0', true, passwd)).toThrow(/is root/);
    expect(lookupUser('nobody:x', passwd)).toBeUndefined();
  });

  it('reads CAP_SETUID and CAP_SETGID from the effective capability set', () => {
    expect(maySwitchUsers('CapEff:\t000001fffeffffff\n')).toBe(true);
    expect(maySwitchUsers('CapEff:\t00000000000000c0\n')).toBe(true); // exactly SETGID (6) + SETUID (7)
    expect(maySwitchUsers('CapEff:\t000001fffeffff3f\n')).toBe(false); // both dropped
    expect(maySwitchUsers('CapEff:\t000001fffeffff7f\n')).toBe(false); // SETUID dropped
    expect(maySwitchUsers('CapEff:\t0000000000000000\n')).toBe(false);
  });
});
