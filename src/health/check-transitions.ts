import type { LoggerService } from '@nestjs/common';

export type CheckState = 'up' | 'down';

/**
 * Remembers each readiness check's last state and logs only when it changes: the first failure
 * with its full error (host, port, reason), and the recovery. Probes come every few seconds from
 * every orchestrator; a line per probe would drown the one that matters.
 */
export class CheckTransitions {
  private readonly last = new Map<string, CheckState>();

  constructor(private readonly logger: Pick<LoggerService, 'log' | 'warn'>) {}

  up(check: string): void {
    if (this.last.get(check) === 'down') this.logger.log({ msg: 'readiness check is up again', check });
    this.last.set(check, 'up');
  }

  /** `at` is the service's host:port: a driver's message ("Connection terminated") may not say. */
  down(check: string, err: unknown, at?: string): void {
    if (this.last.get(check) !== 'down')
      this.logger.warn({ msg: 'readiness check is down', check, at, err: describe(err) });
    this.last.set(check, 'down');
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // AggregateError (a connect that tried IPv4 and IPv6) keeps the addresses in its parts.
  const parts = err instanceof AggregateError ? err.errors.map((e) => describe(e)) : [];
  return [err.message || err.name, ...parts].filter(Boolean).join('; ');
}
