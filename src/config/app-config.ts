import { resolve } from 'node:path';

export type AppRole = 'api' | 'worker' | 'scheduler' | 'all';
export type RunExecutorKind = 'shell' | 'noop';

/** The one typed configuration object. Nothing outside src/config reads process.env. */
export interface AppConfig {
  nodeEnv: string;
  role: AppRole;
  port: number;
  databaseUrl: string;
  redisUrl: string;
  /** Prefix for every Redis key we and Bull write, so test runs and tenants never collide. */
  redisPrefix: string;
  apiKeys: string[];
  /** True when API_KEYS was unset outside production and a development key was generated. */
  apiKeysGenerated: boolean;
  adminUser?: string;
  adminPassword?: string;
  planeWebhookSecrets: string[];
  planeBotActorIds: string[];
  planeProjectMaxConcurrentRuns: number;
  webhookBodyLimitBytes: number;
  slackWebhookUrl?: string;
  orchestratorCommand: string;
  runExecutor: RunExecutorKind;
  runTimeoutMs: number;
  runMaxAttempts: number;
  workerConcurrency: number;
  workspaceRoot: string;
  runLockTtlMs: number;
  queueLockDurationMs: number;
  queueStalledIntervalMs: number;
  queueMaxStalledCount: number;
  runRetryBaseDelayMs: number;
  runRetryMaxDelayMs: number;
  /** Backoff after an infrastructure error (Postgres/Redis unreachable, an unexpected throw) in a queue processor or the webhook spool drainer. */
  infraRetryBaseDelayMs: number;
  infraRetryMaxDelayMs: number;
  reconcileIntervalMs: number;
  notifyRetryBaseDelayMs: number;
  notifyMaxAttempts: number;
  idempotencyKeyTtlMs: number;
  logLevel: string;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string, fallback?: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? fallback : v.trim();
}

function list(env: Env, name: string): string[] {
  return (str(env, name) ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function int(env: Env, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function url(env: Env, name: string, fallback: string | undefined, protocols: string[]): string | undefined {
  const raw = str(env, name, fallback);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = str(env, name, fallback) as T;
  if (!allowed.includes(raw)) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  return raw;
}

/** The bundled sample orchestrator: writes a result file into the run's workspace. */
export const SAMPLE_ORCHESTRATOR = resolve(__dirname, '../../../scripts/sample-orchestrator.sh');

export function loadConfig(env: Env, generateDevKey: () => string = () => ''): AppConfig {
  const nodeEnv = str(env, 'NODE_ENV', 'development')!;
  let apiKeys = list(env, 'API_KEYS');
  let apiKeysGenerated = false;
  if (apiKeys.length === 0) {
    if (nodeEnv === 'production') throw new ConfigError('API_KEYS is required (comma-separated bearer tokens)');
    const key = generateDevKey();
    if (!key) throw new ConfigError('API_KEYS is required (comma-separated bearer tokens)');
    apiKeys = [key];
    apiKeysGenerated = true;
  }
  if (apiKeys.some((k) => k.length < 16)) throw new ConfigError('every API_KEYS entry must be at least 16 characters');
  const adminUser = str(env, 'ADMIN_USER');
  const adminPassword = str(env, 'ADMIN_PASSWORD');
  if ((adminUser === undefined) !== (adminPassword === undefined)) {
    throw new ConfigError('ADMIN_USER and ADMIN_PASSWORD must be set together');
  }
  const runLockTtlMs = int(env, 'RUN_LOCK_TTL_MS', 30000, 300);
  const workerConcurrency = int(env, 'WORKER_CONCURRENCY', 4, 1, 256);
  const runRetryBaseDelayMs = int(env, 'RUN_RETRY_BASE_DELAY_MS', 1000, 1);
  const runRetryMaxDelayMs = int(env, 'RUN_RETRY_MAX_DELAY_MS', 120000, 1);
  if (runRetryMaxDelayMs < runRetryBaseDelayMs) {
    throw new ConfigError('RUN_RETRY_MAX_DELAY_MS must not be below RUN_RETRY_BASE_DELAY_MS');
  }
  const infraRetryBaseDelayMs = int(env, 'INFRA_RETRY_BASE_DELAY_MS', 500, 1);
  const infraRetryMaxDelayMs = int(env, 'INFRA_RETRY_MAX_DELAY_MS', 30000, 1);
  if (infraRetryMaxDelayMs < infraRetryBaseDelayMs) {
    throw new ConfigError('INFRA_RETRY_MAX_DELAY_MS must not be below INFRA_RETRY_BASE_DELAY_MS');
  }
  return {
    nodeEnv,
    role: oneOf<AppRole>(env, 'APP_ROLE', 'all', ['api', 'worker', 'scheduler', 'all']),
    port: int(env, 'PORT', 3000, 0, 65535),
    databaseUrl: url(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/onceflow', ['postgres:', 'postgresql:'])!,
    redisUrl: url(env, 'REDIS_URL', 'redis://127.0.0.1:6379/0', ['redis:', 'rediss:'])!,
    redisPrefix: str(env, 'REDIS_PREFIX', 'onceflow')!,
    apiKeys,
    apiKeysGenerated,
    adminUser,
    adminPassword,
    planeWebhookSecrets: list(env, 'PLANE_WEBHOOK_SECRETS'),
    planeBotActorIds: list(env, 'PLANE_BOT_ACTOR_IDS'),
    planeProjectMaxConcurrentRuns: int(env, 'PLANE_PROJECT_MAX_CONCURRENT_RUNS', 1, 1, 10000),
    webhookBodyLimitBytes: int(env, 'WEBHOOK_BODY_LIMIT_BYTES', 1024 * 1024, 1024),
    slackWebhookUrl: url(env, 'SLACK_WEBHOOK_URL', undefined, ['http:', 'https:']),
    orchestratorCommand: str(env, 'ORCHESTRATOR_COMMAND', `sh '${SAMPLE_ORCHESTRATOR}'`)!,
    runExecutor: oneOf<RunExecutorKind>(env, 'RUN_EXECUTOR', 'shell', ['shell', 'noop']),
    runTimeoutMs: int(env, 'RUN_TIMEOUT_MS', 3600000, 100),
    runMaxAttempts: int(env, 'RUN_MAX_ATTEMPTS', 5, 1, 1000),
    workerConcurrency,
    workspaceRoot: resolve(str(env, 'WORKSPACE_ROOT', './workspaces')!),
    runLockTtlMs,
    queueLockDurationMs: int(env, 'QUEUE_LOCK_DURATION_MS', 30000, 300),
    queueStalledIntervalMs: int(env, 'QUEUE_STALLED_INTERVAL_MS', 30000, 100),
    // Above the concurrency: a frozen worker's idle slots can each re-take a stalled job once
    // before the live worker sees it (toolchain notes); Postgres decides who really runs it.
    queueMaxStalledCount: int(env, 'QUEUE_MAX_STALLED_COUNT', workerConcurrency + 2, 1),
    runRetryBaseDelayMs,
    runRetryMaxDelayMs,
    infraRetryBaseDelayMs,
    infraRetryMaxDelayMs,
    reconcileIntervalMs: int(env, 'RECONCILE_INTERVAL_MS', 30000, 100),
    notifyRetryBaseDelayMs: int(env, 'NOTIFY_RETRY_BASE_DELAY_MS', 2000, 1),
    notifyMaxAttempts: int(env, 'NOTIFY_MAX_ATTEMPTS', 8, 1, 100),
    idempotencyKeyTtlMs: int(env, 'IDEMPOTENCY_KEY_TTL_MS', 24 * 3600 * 1000, 1000),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  };
}

export function roleServesApi(role: AppRole): boolean {
  return role === 'api' || role === 'all';
}
export function roleRunsWorkers(role: AppRole): boolean {
  return role === 'worker' || role === 'all';
}
export function roleRunsScheduler(role: AppRole): boolean {
  return role === 'scheduler' || role === 'all';
}
