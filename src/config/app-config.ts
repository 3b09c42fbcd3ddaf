import { resolve } from 'node:path';
import { AppRole, defaultPoolSize, roleServesApi } from './roles';

export type RunExecutorKind = 'shell' | 'noop';
export type LlmCacheScope = 'run' | 'project' | 'off';

/** The one typed configuration object, grouped by concern. Nothing outside src/config reads process.env. */
export interface AppConfig {
  nodeEnv: string;
  role: AppRole;
  port: number;
  logLevel: string;
  database: {
    url: string;
    /** Prepare the hot-path statements (off behind a pooler that cannot keep prepared statements). */
    preparedStatements: boolean;
    /** Most Postgres connections this process opens (its pool's size). */
    poolSize: number;
  };
  redis: {
    url: string;
    /** Prefix for every Redis key we and Bull write, so test runs and tenants never collide. */
    prefix: string;
  };
  auth: {
    apiKeys: string[];
    /** True when API_KEYS was unset outside production and a development key was generated. */
    apiKeysGenerated: boolean;
    adminUser?: string;
    adminPassword?: string;
    /** True when ADMIN_USER/ADMIN_PASSWORD were unset outside production and development ones were generated. */
    adminCredentialsGenerated: boolean;
  };
  plane: {
    webhookSecrets: string[];
    botActorIds: string[];
    projectMaxConcurrentRuns: number;
    bodyLimitBytes: number;
  };
  notify: {
    slackWebhookUrl?: string;
    retryBaseDelayMs: number;
    maxAttempts: number;
  };
  runs: {
    command: string;
    executor: RunExecutorKind;
    timeoutMs: number;
    maxAttempts: number;
    lockTtlMs: number;
    retryBaseDelayMs: number;
    retryMaxDelayMs: number;
    workspaceRoot: string;
    /**
     * Who a run's command runs as: a user name or `uid:gid`, `same` (the worker's own user, with
     * the risks that brings), or undefined for the default unprivileged user (resolved at start).
     */
    runAsUser: string | undefined;
    /** Names of worker variables a run's command may also see (besides the allow-list). */
    envPassthrough: string[];
    idempotencyKeyTtlMs: number;
  };
  worker: {
    concurrency: number;
    /** Port of the worker's API for its own commands (steps, values, LLM proxy) on 127.0.0.1; 0 = any free one. */
    apiPort: number;
  };
  queue: {
    lockDurationMs: number;
    stalledIntervalMs: number;
    maxStalledCount: number;
    /** Backoff after an infrastructure error (Postgres/Redis unreachable, an unexpected throw) in a queue processor or the webhook spool drainer. */
    infraRetryBaseDelayMs: number;
    infraRetryMaxDelayMs: number;
    reconcileIntervalMs: number;
  };
  llm: {
    /** Where the worker's caching proxy forwards OpenAI-style and Anthropic-style requests. */
    openaiUpstream: string;
    anthropicUpstream: string;
    cacheScope: LlmCacheScope;
    cacheTtlMs: number;
    cacheMaxBytes: number;
  };
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

/** An LLM upstream: http(s), no query, no credentials; kept without a trailing slash. */
function upstream(env: Env, name: string, fallback: string): string {
  const raw = url(env, name, fallback, ['http:', 'https:'])!;
  const parsed = new URL(raw);
  if (parsed.search || parsed.hash || parsed.username || parsed.password) {
    throw new ConfigError(`${name} must be a plain base URL (no query, fragment or credentials)`);
  }
  return raw.replace(/\/+$/, '');
}

/** onceflow's own credentials: never handed to a run's command, whatever the operator lists. */
export const WITHHELD_FROM_COMMANDS = [
  'API_KEYS',
  'ADMIN_USER',
  'ADMIN_PASSWORD',
  'PLANE_WEBHOOK_SECRETS',
  'SLACK_WEBHOOK_URL',
  'DATABASE_URL',
  'REDIS_URL',
];

function passthrough(env: Env): string[] {
  const names = list(env, 'ORCHESTRATOR_ENV_PASSTHROUGH');
  for (const n of names) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(n))
      throw new ConfigError(`ORCHESTRATOR_ENV_PASSTHROUGH: "${n}" is not a variable name`);
    if (WITHHELD_FROM_COMMANDS.includes(n))
      throw new ConfigError(
        `ORCHESTRATOR_ENV_PASSTHROUGH may not list ${n}: onceflow's credentials never reach a command`,
      );
  }
  return names;
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = str(env, name, fallback) as T;
  if (!allowed.includes(raw)) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  return raw;
}

/**
 * The bundled sample orchestrator (scripts/sample-orchestrator.sh), which every worker installs on
 * its commands' PATH under this name.
 */
export const SAMPLE_ORCHESTRATOR_COMMAND = 'onceflow-sample-orchestrator';

export interface AdminCredentials {
  user: string;
  password: string;
}

/**
 * Where development credentials come from when their variables are unset outside production
 * (src/config/env.ts: 0600 files in the working directory). Without them those stay required.
 */
export interface DevCredentials {
  apiKey?: () => string;
  admin?: () => AdminCredentials;
}

export function loadConfig(env: Env, dev: DevCredentials = {}): AppConfig {
  const nodeEnv = str(env, 'NODE_ENV', 'development')!;
  const role = oneOf<AppRole>(env, 'APP_ROLE', 'all', ['api', 'worker', 'scheduler', 'all']);
  let apiKeys = list(env, 'API_KEYS');
  let apiKeysGenerated = false;
  if (apiKeys.length === 0) {
    if (nodeEnv === 'production' || !dev.apiKey)
      throw new ConfigError('API_KEYS is required (comma-separated bearer tokens)');
    apiKeys = [dev.apiKey()];
    apiKeysGenerated = true;
  }
  if (apiKeys.some((k) => k.length < 16)) throw new ConfigError('every API_KEYS entry must be at least 16 characters');
  let adminUser = str(env, 'ADMIN_USER');
  let adminPassword = str(env, 'ADMIN_PASSWORD');
  if ((adminUser === undefined) !== (adminPassword === undefined)) {
    throw new ConfigError('ADMIN_USER and ADMIN_PASSWORD must be set together');
  }
  // Only a process that serves the dashboard needs them; in production, unset keeps it closed (503).
  let adminCredentialsGenerated = false;
  if (adminUser === undefined && nodeEnv !== 'production' && roleServesApi(role) && dev.admin) {
    ({ user: adminUser, password: adminPassword } = dev.admin());
    adminCredentialsGenerated = true;
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
    role,
    port: int(env, 'PORT', 3000, 0, 65535),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    database: {
      url: url(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/onceflow', ['postgres:', 'postgresql:'])!,
      preparedStatements: oneOf(env, 'PG_PREPARED_STATEMENTS', 'true', ['true', 'false']) === 'true',
      poolSize: int(env, 'DATABASE_POOL_SIZE', defaultPoolSize(role, workerConcurrency), 2, 1000),
    },
    redis: {
      url: url(env, 'REDIS_URL', 'redis://127.0.0.1:6379/0', ['redis:', 'rediss:'])!,
      prefix: str(env, 'REDIS_PREFIX', 'onceflow')!,
    },
    auth: { apiKeys, apiKeysGenerated, adminUser, adminPassword, adminCredentialsGenerated },
    plane: {
      webhookSecrets: list(env, 'PLANE_WEBHOOK_SECRETS'),
      botActorIds: list(env, 'PLANE_BOT_ACTOR_IDS'),
      projectMaxConcurrentRuns: int(env, 'PLANE_PROJECT_MAX_CONCURRENT_RUNS', 1, 1, 10000),
      bodyLimitBytes: int(env, 'WEBHOOK_BODY_LIMIT_BYTES', 1024 * 1024, 1024),
    },
    notify: {
      slackWebhookUrl: url(env, 'SLACK_WEBHOOK_URL', undefined, ['http:', 'https:']),
      retryBaseDelayMs: int(env, 'NOTIFY_RETRY_BASE_DELAY_MS', 2000, 1),
      maxAttempts: int(env, 'NOTIFY_MAX_ATTEMPTS', 8, 1, 100),
    },
    runs: {
      command: str(env, 'ORCHESTRATOR_COMMAND', SAMPLE_ORCHESTRATOR_COMMAND)!,
      executor: oneOf<RunExecutorKind>(env, 'RUN_EXECUTOR', 'shell', ['shell', 'noop']),
      timeoutMs: int(env, 'RUN_TIMEOUT_MS', 3600000, 100),
      maxAttempts: int(env, 'RUN_MAX_ATTEMPTS', 5, 1, 1000),
      lockTtlMs: runLockTtlMs,
      retryBaseDelayMs: runRetryBaseDelayMs,
      retryMaxDelayMs: runRetryMaxDelayMs,
      workspaceRoot: resolve(str(env, 'WORKSPACE_ROOT', './workspaces')!),
      runAsUser: str(env, 'RUN_AS_USER'),
      envPassthrough: passthrough(env),
      idempotencyKeyTtlMs: int(env, 'IDEMPOTENCY_KEY_TTL_MS', 24 * 3600 * 1000, 1000),
    },
    worker: {
      concurrency: workerConcurrency,
      apiPort: int(env, 'WORKER_API_PORT', 0, 0, 65535),
    },
    queue: {
      lockDurationMs: int(env, 'QUEUE_LOCK_DURATION_MS', 30000, 300),
      stalledIntervalMs: int(env, 'QUEUE_STALLED_INTERVAL_MS', 30000, 100),
      // Above the concurrency: a frozen worker's idle slots can each re-take a stalled job once
      // before the live worker sees it (toolchain notes); Postgres decides who really runs it.
      maxStalledCount: int(env, 'QUEUE_MAX_STALLED_COUNT', workerConcurrency + 2, 1),
      infraRetryBaseDelayMs,
      infraRetryMaxDelayMs,
      reconcileIntervalMs: int(env, 'RECONCILE_INTERVAL_MS', 30000, 100),
    },
    llm: {
      openaiUpstream: upstream(env, 'LLM_OPENAI_UPSTREAM', 'https://api.openai.com/v1'),
      anthropicUpstream: upstream(env, 'LLM_ANTHROPIC_UPSTREAM', 'https://api.anthropic.com'),
      cacheScope: oneOf<LlmCacheScope>(env, 'LLM_CACHE_SCOPE', 'run', ['run', 'project', 'off']),
      cacheTtlMs: int(env, 'LLM_CACHE_TTL_MS', 7 * 24 * 3600 * 1000, 1000),
      cacheMaxBytes: int(env, 'LLM_CACHE_MAX_BYTES', 8 * 1024 * 1024, 0, 512 * 1024 * 1024),
    },
  };
}
