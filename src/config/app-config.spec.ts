import { ConfigError, loadConfig } from './app-config';

const base = { API_KEYS: 'k'.repeat(20) };

describe('loadConfig', () => {
  it('applies the contract defaults', () => {
    const c = loadConfig(base);
    expect(c).toMatchObject({
      role: 'all',
      port: 3000,
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/onceflow',
      redisUrl: 'redis://127.0.0.1:6379/0',
      runTimeoutMs: 3_600_000,
      runMaxAttempts: 5,
      workerConcurrency: 4,
      runLockTtlMs: 30_000,
      queueLockDurationMs: 30_000,
      queueStalledIntervalMs: 30_000,
      runRetryBaseDelayMs: 1000,
      runRetryMaxDelayMs: 120_000,
      infraRetryBaseDelayMs: 500,
      infraRetryMaxDelayMs: 30_000,
      reconcileIntervalMs: 30_000,
      notifyRetryBaseDelayMs: 2000,
      notifyMaxAttempts: 8,
      planeWebhookSecrets: [],
      slackWebhookUrl: undefined,
    });
    expect(c.workspaceRoot).toMatch(/workspaces$/);
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
  ])('refuses %j with a clear message', (env, message) => {
    expect(() => loadConfig({ ...base, ...env })).toThrow(message);
    expect(() => loadConfig({ ...base, ...env })).toThrow(ConfigError);
  });

  it('requires API_KEYS in production and generates a development key elsewhere', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' }, () => 'dev_key_0123456789abcdef')).toThrow(/API_KEYS is required/);
    const dev = loadConfig({}, () => 'dev_key_0123456789abcdef');
    expect(dev.apiKeys).toEqual(['dev_key_0123456789abcdef']);
    expect(dev.apiKeysGenerated).toBe(true);
  });

  it('splits comma lists and trims them', () => {
    const c = loadConfig({ ...base, PLANE_WEBHOOK_SECRETS: ' a , b,,', PLANE_BOT_ACTOR_IDS: 'x' });
    expect(c.planeWebhookSecrets).toEqual(['a', 'b']);
    expect(c.planeBotActorIds).toEqual(['x']);
  });
});
