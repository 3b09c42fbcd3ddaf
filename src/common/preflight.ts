import Redis from 'ioredis';
import { Client } from 'pg';
import type { AppConfig } from '../config/app-config';

export class ServiceUnreachableError extends Error {}

const HOW_TO_START = 'start it with: docker compose up -d postgres redis';

/** `host:port` of a Postgres or Redis URL: never the credentials it may hold. */
export function where(raw: string): string {
  const u = new URL(raw);
  return `${u.hostname}:${u.port || (u.protocol.startsWith('redis') ? '6379' : '5432')}`;
}

function reason(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e.code ?? e.message ?? String(err);
}

/** Fails with one clear line naming the service, its address and how to start it. */
export async function checkServices(config: AppConfig): Promise<void> {
  const admin = new URL(config.database.url);
  admin.pathname = '/postgres';
  const pg = new Client({ connectionString: admin.toString(), connectionTimeoutMillis: 3000 });
  try {
    await pg.connect();
  } catch (err) {
    throw new ServiceUnreachableError(
      `cannot reach PostgreSQL at ${where(config.database.url)} (${reason(err)}); ${HOW_TO_START}`,
    );
  } finally {
    await pg.end().catch(() => undefined);
  }
  const redis = new Redis(config.redis.url, {
    lazyConnect: true,
    connectTimeout: 3000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  // The socket error (ECONNREFUSED, ENOTFOUND) says more than ioredis' "Connection is closed".
  let socketError: unknown;
  redis.on('error', (err) => (socketError ??= err));
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new ServiceUnreachableError(
      `cannot reach Redis at ${where(config.redis.url)} (${reason(socketError ?? err)}); ${HOW_TO_START}`,
    );
  } finally {
    redis.disconnect();
  }
}
