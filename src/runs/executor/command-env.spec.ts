import { commandBaseEnv } from './command-env';

describe("a command's environment", () => {
  it('keeps the allow-list and the named passthrough, drops everything else', () => {
    const worker = {
      PATH: '/usr/bin',
      HOME: '/root',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      TZ: 'UTC',
      TMPDIR: '/tmp',
      API_KEYS: 'k',
      DATABASE_URL: 'postgres://u:p@h/db',
      PGPASSWORD: 'p',
      AWS_SECRET_ACCESS_KEY: 's',
      OPENAI_API_KEY: 'sk',
      NODE_OPTIONS: '--inspect',
      UNSET: undefined,
    };
    expect(commandBaseEnv(worker, ['OPENAI_API_KEY', 'NOT_THERE'])).toEqual({
      PATH: '/usr/bin',
      HOME: '/root',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      TZ: 'UTC',
      TMPDIR: '/tmp',
      OPENAI_API_KEY: 'sk',
    });
    expect(commandBaseEnv(worker, [])).not.toHaveProperty('OPENAI_API_KEY');
  });
});
