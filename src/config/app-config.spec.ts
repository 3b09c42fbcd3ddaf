import { ConfigError, loadConfig } from './app-config';

const base = { API_KEYS: 'k'.repeat(20) };

describe('loadConfig', () => {
  it('applies the contract defaults', () => {
    const c = loadConfig(base);
    expect(c).toMatchObject({
      role: 'all',
      port: 3000,
      database: { url: 'postgres://postgres@127.0.0.1:5432/onceflow', preparedStatements: true },
      redis: { url: 'redis://127.0.0.1:6379/0', prefix: 'onceflow' },
      runs: {
        timeoutMs: 3_600_000,
        maxAttempts: 5,
        lockTtlMs: 30_000,
        retryBaseDelayMs: 1000,
        retryMaxDelayMs: 120_000,
      },
      worker: { concurrency: 4 },
      queue: {
        lockDurationMs: 30_000,
        stalledIntervalMs: 30_000,
        infraRetryBaseDelayMs: 500,
        infraRetryMaxDelayMs: 30_000,
        reconcileIntervalMs: 30_000,
      },
      notify: { retryBaseDelayMs: 2000, maxAttempts: 8, slackWebhookUrl: undefined },
      plane: { webhookSecrets: [] },
    });
    expect(c.runs.workspaceRoot).toMatch(/workspaces$/);
  });

  it.each([
    [{ PORT: 'abc' }, /PORT must be a whole number/],
    [{ APP_ROLE: 'boss' }, /APP_ROLE must be one of/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must use/],
    [{ SLACK_WEBHOOK_URL: 'not a url' }, /SLACK_WEBHOOK_URL is not a valid URL/],
    [{ ADMIN_USER: 'admin' }, /ADMIN_USER and ADMIN_PASSWORD/],
    [{ RUN_RETRY_BASE_DELAY_MS: '5000', RUN_RETRY_MAX_DELAY_MS: '100' }, /RUN_RETRY_MAX_DELAY_MS/],
    [{ INFRA_RETRY_BASE_DELAY_MS: '5000', INFRA_RETRY_MAX_DELAY_MS: '100' }, /INFRA_RETRY_MAX_DELAY_MS/],
    [{ INFRA_RETRY_BASE_DELAY_MS: '0' }, /INFRA_RETRY_BASE_DELAY_MS must be between/],
    [{ API_KEYS: 'short' }, /at least 16/],
    [{ DATABASE_POOL_SIZE: '1' }, /DATABASE_POOL_SIZE must be between 2/],
    [{ DATABASE_POOL_SIZE: 'many' }, /DATABASE_POOL_SIZE must be a whole number/],
  ])('refuses %j with a clear message', (env, message) => {
    expect(() => loadConfig({ ...base, ...env })).toThrow(message);
    expect(() => loadConfig({ ...base, ...env })).toThrow(ConfigError);
  });

  it('requires API_KEYS in production and generates a development key elsewhere', () => {
    const apiKey = () => 'dev_key_0123456789abcdef';
    expect(() => loadConfig({ NODE_ENV: 'production' }, { apiKey })).toThrow(/API_KEYS is required/);
    expect(() => loadConfig({})).toThrow(/API_KEYS is required/);
    const dev = loadConfig({}, { apiKey });
    expect(dev.auth.apiKeys).toEqual(['dev_key_0123456789abcdef']);
    expect(dev.auth.apiKeysGenerated).toBe(true);
    expect(loadConfig(base, { apiKey }).auth.apiKeysGenerated).toBe(false);
  });

  describe('development dashboard credentials', () => {
    const generated = { user: 'admin', password: 'generated-password' };
    let calls = 0;
    const admin = () => {
      calls++;
      return generated;
    };
    beforeEach(() => (calls = 0));

    it.each(['development', 'test'])(
      'are generated when ADMIN_USER/ADMIN_PASSWORD are unset and NODE_ENV=%s',
      (NODE_ENV) => {
        const c = loadConfig({ ...base, NODE_ENV }, { admin });
        expect(c.auth).toMatchObject({
          adminUser: 'admin',
          adminPassword: 'generated-password',
          adminCredentialsGenerated: true,
        });
        expect(calls).toBe(1);
      },
    );

    it('are never generated in production: the dashboard stays closed', () => {
      const c = loadConfig({ ...base, NODE_ENV: 'production' }, { admin });
      expect(c.auth).toMatchObject({
        adminUser: undefined,
        adminPassword: undefined,
        adminCredentialsGenerated: false,
      });
      expect(calls).toBe(0);
    });

    it('give way to ADMIN_USER/ADMIN_PASSWORD', () => {
      const c = loadConfig({ ...base, ADMIN_USER: 'ops', ADMIN_PASSWORD: 'set-by-operator' }, { admin });
      expect(c.auth).toMatchObject({
        adminUser: 'ops',
        adminPassword: 'set-by-operator',
        adminCredentialsGenerated: false,
      });
      expect(calls).toBe(0);
      expect(() => loadConfig({ ...base, ADMIN_PASSWORD: 'only-half' }, { admin })).toThrow(/must be set together/);
    });

    it.each(['worker', 'scheduler'])('are not generated for role %s, which serves no dashboard', (APP_ROLE) => {
      expect(loadConfig({ ...base, APP_ROLE }, { admin }).auth.adminCredentialsGenerated).toBe(false);
      expect(calls).toBe(0);
    });
  });

  it('splits comma lists and trims them', () => {
    const c = loadConfig({ ...base, PLANE_WEBHOOK_SECRETS: ' a , b,,', PLANE_BOT_ACTOR_IDS: 'x' });
    expect(c.plane.webhookSecrets).toEqual(['a', 'b']);
    expect(c.plane.botActorIds).toEqual(['x']);
  });

  it('refuses to pass onceflow credentials or malformed names through to commands', () => {
    expect(
      loadConfig({ ...base, ORCHESTRATOR_ENV_PASSTHROUGH: 'OPENAI_API_KEY, GIT_TOKEN' }).runs.envPassthrough,
    ).toEqual(['OPENAI_API_KEY', 'GIT_TOKEN']);
    for (const name of [
      'API_KEYS',
      'DATABASE_URL',
      'ADMIN_PASSWORD',
      'SLACK_WEBHOOK_URL',
      'REDIS_URL',
      'PLANE_WEBHOOK_SECRETS',
    ]) {
      expect(() => loadConfig({ ...base, ORCHESTRATOR_ENV_PASSTHROUGH: `X,${name}` })).toThrow(ConfigError);
    }
    expect(() => loadConfig({ ...base, ORCHESTRATOR_ENV_PASSTHROUGH: 'A=B' })).toThrow(/not a variable name/);
  });

  it('reads the LLM cache settings, and refuses an upstream with credentials or a query', () => {
    expect(loadConfig(base).llm).toEqual({
      openaiUpstream: 'https://api.openai.com/v1',
      anthropicUpstream: 'https://api.anthropic.com',
      cacheScope: 'run',
      cacheTtlMs: 604_800_000,
      cacheMaxBytes: 8_388_608,
    });
    expect(loadConfig({ ...base, LLM_OPENAI_UPSTREAM: 'http://127.0.0.1:9/v1/' }).llm.openaiUpstream).toBe(
      'http://127.0.0.1:9/v1',
    );
    expect(() => loadConfig({ ...base, LLM_OPENAI_UPSTREAM: 'https://u:p@x.example/v1' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, LLM_ANTHROPIC_UPSTREAM: 'https://x.example/?a=1' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, LLM_CACHE_SCOPE: 'global' })).toThrow(ConfigError);
  });

  it("sizes the Postgres pool by role: a worker's follows its concurrency, the API's does not", () => {
    const pool = (env: Record<string, string>) => loadConfig({ ...base, ...env }).database.poolSize;
    expect(pool({})).toBe(13); // all: the worker's, 4 * 2 + 5
    expect(pool({ APP_ROLE: 'worker', WORKER_CONCURRENCY: '32' })).toBe(69);
    expect(pool({ APP_ROLE: 'worker', WORKER_CONCURRENCY: '1' })).toBe(10);
    // 69 connections for an API process on the bench's 2 cores made each new Plane item cost
    // Postgres 2.3–2.6 times the CPU it costs with 10 (docs/benchmarks.md, "The API's Postgres pool").
    expect(pool({ APP_ROLE: 'api', WORKER_CONCURRENCY: '32' })).toBe(10);
    expect(pool({ APP_ROLE: 'scheduler', WORKER_CONCURRENCY: '32' })).toBe(10);
    expect(pool({ APP_ROLE: 'api', DATABASE_POOL_SIZE: '24' })).toBe(24);
    expect(pool({ APP_ROLE: 'worker', DATABASE_POOL_SIZE: '8' })).toBe(8);
  });
});
