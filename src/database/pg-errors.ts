/** Connection-level failures worth retrying (the statement never committed or we cannot know). */
const TRANSIENT_PG_CODES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08003',
  '08006',
  '08001',
  '08004',
  '40001',
  '40P01',
]);

export function isTransientDbError(err: unknown): boolean {
  const e = err as { code?: string; message?: string; driverError?: { code?: string } };
  const code = e?.driverError?.code ?? e?.code;
  if (code && TRANSIENT_PG_CODES.has(code)) return true;
  if (code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'EPIPE') return true;
  const msg = e?.message ?? '';
  const name = (err as Error)?.name ?? '';
  // TypeORM surfaces a connection that died under a transaction as a released query runner.
  if (/QueryRunner(Provider)?AlreadyReleased/.test(name)) return true;
  return /Connection terminated|terminating connection|connection timeout|Client has encountered a connection error|not queryable|already released|ECONNRESET|ECONNREFUSED/i.test(
    msg,
  );
}

/** Postgres cannot be reached or cannot take us now: everything transient, plus network and pool-side failures to get a connection. */
const UNAVAILABLE_CODES = new Set(['53300', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * True when a statement failed because Postgres is out of reach (down, restarting, a network cut,
 * a pool that could not get a connection in time) rather than because of what it asked. Such a
 * statement can be tried again later unchanged; the Plane intake spools the delivery for that.
 */
export function isDbUnavailableError(err: unknown): boolean {
  if (isTransientDbError(err)) return true;
  const code = pgErrorCode(err);
  if (code && UNAVAILABLE_CODES.has(code)) return true;
  return /timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(
    (err as Error)?.message ?? '',
  );
}

export function pgErrorCode(err: unknown): string | undefined {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e?.driverError?.code ?? e?.code;
}

export function pgConstraint(err: unknown): string | undefined {
  const e = err as { constraint?: string; driverError?: { constraint?: string } };
  return e?.driverError?.constraint ?? e?.constraint;
}
