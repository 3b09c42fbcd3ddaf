import { hostname } from 'node:os';
import type { Params } from 'nestjs-pino';
import { AppConfig } from '../config/app-config';
import { roleServesApi } from '../config/roles';

/** Paths pino replaces with "[redacted]": credentials, signatures and secrets never reach a log. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-plane-signature"]',
  'req.headers.cookie',
  'req.headers["idempotency-key"]',
  'headers.authorization',
  'headers["x-plane-signature"]',
  'signature',
  'secret',
  'secrets',
  'apiKey',
  'apiKeys',
  'password',
  'slackWebhookUrl',
  'url',
  '*.signature',
  '*.secret',
  '*.password',
  '*.slackWebhookUrl',
];

export function loggerParams(config: AppConfig): Params {
  return {
    // A role without the API serves only /health and /metrics, whose requests are not logged. Bound
    // there, the request logger would switch on its AsyncLocalStorage at the first probe or scrape,
    // and from then on every promise of the process pays Node's async hooks (an await ~3.5 × as
    // dear; a worker awaits hundreds per run): docs/benchmarks.md, "One write per turn for Bull, no
    // async hooks in a worker".
    ...(roleServesApi(config.role) ? {} : { forRoutes: [] }),
    pinoHttp: {
      level: config.logLevel,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      autoLogging: { ignore: (req) => (req.url ?? '').startsWith('/health') || (req.url ?? '').startsWith('/metrics') },
      // Fixed fields belong in the root logger's bindings: as pino-http `customProps` they cost a
      // child logger and a re-serialisation on every request.
      base: { pid: process.pid, hostname: hostname(), service: 'onceflow', role: config.role },
      serializers: {
        req: (req: { id: unknown; method: string; url: string }) => ({ id: req.id, method: req.method, url: req.url }),
      },
    },
  };
}
