import { checkBasicAuth } from './basic-auth';

const basic = (s: string) => `Basic ${Buffer.from(s, 'utf8').toString('base64')}`;
const creds = { user: 'ops', password: 'p:ss w0rd-é' };

describe('checkBasicAuth', () => {
  it('accepts the configured pair, with a password that contains ":" and non-ASCII', () => {
    expect(checkBasicAuth(basic('ops:p:ss w0rd-é'), creds)).toBe('ok');
    expect(checkBasicAuth(basic('ops:p:ss w0rd-é').replace('Basic', 'basic'), creds)).toBe('ok');
  });

  it.each([
    ['no header', undefined],
    ['empty header', ''],
    ['wrong password', basic('ops:p:ss w0rd')],
    ['password with a suffix', basic('ops:p:ss w0rd-éX')],
    ['wrong user', basic('root:p:ss w0rd-é')],
    ['user and password swapped', basic('p:ss w0rd-é:ops')],
    ['no colon', basic('opsp:ss w0rd-é')],
    ['empty pair', basic(':')],
    ['bearer scheme', 'Bearer ops:p:ss w0rd-é'],
    ['not base64', 'Basic ###'],
    ['two tokens', `${basic('ops:p:ss w0rd-é')} extra`],
  ])('refuses %s', (_name, header) => {
    expect(checkBasicAuth(header, creds)).toBe('unauthorized');
  });

  it('is never open when credentials are not configured', () => {
    expect(checkBasicAuth(basic(':'), {})).toBe('not_configured');
    expect(checkBasicAuth(undefined, { user: 'ops' })).toBe('not_configured');
    expect(checkBasicAuth(basic('ops:'), { user: 'ops', password: '' })).toBe('not_configured');
  });
});
