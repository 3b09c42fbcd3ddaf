import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { isTransientDbError } from '../../database/pg-errors';
import { MetricsService } from '../../metrics/metrics.service';
import { LlmProxy } from '../llm-cache/llm-proxy';
import { fail, readBody } from '../llm-cache/proxy-http';
import { AttemptGrant, RunAttempts } from './run-attempts';
import { StepJournalRepository } from './step-journal.repository';
import { EXIT_CODE_HEADER, MAX_RECORDED_BYTES, STEP_NAME_PATTERN, STEP_STATE_HEADER } from './worker-api.protocol';

/**
 * The worker's API for its own commands, on 127.0.0.1 only: the step journal and values
 * (`/v1/...`, credential in `Authorization: Bearer`) for the `onceflow` CLI, and the LLM proxy
 * (`/llm/<credential>/<provider>/...`: the SDKs send their own API key in Authorization, so ours
 * travels in the base URL). The command never talks to Postgres or Redis; this server does, for
 * the attempt its credential stands for. URLs hold credentials: nothing here logs a URL.
 *
 * Answers the CLI maps to exit codes: 401/403/409 → 3 (the attempt no longer holds the run),
 * 503 → 75 (retry the attempt), 400/413 → 2, a missing value 404 → 1.
 */
@Injectable()
export class WorkerApiServer implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(WorkerApiServer.name);
  private server: Server | undefined;
  private listening: Promise<string> | undefined;

  constructor(
    private readonly attempts: RunAttempts,
    private readonly journal: StepJournalRepository,
    private readonly proxy: LlmProxy,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    const server = createServer((req, res) => void this.route(req, res));
    // A command's slow upload must not hold a socket for ever; LLM answers can take minutes.
    server.requestTimeout = 15 * 60_000;
    this.server = server;
    this.listening = new Promise<string>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.worker.apiPort, '127.0.0.1', () =>
        resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
      );
    });
  }

  /** The base URL a command reaches this worker at (ONCEFLOW_URL). */
  url(): Promise<string> {
    if (!this.listening) throw new Error('worker API not started');
    return this.listening;
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = req.url ?? '/';
      const llm = /^\/llm\/([^/]+)\/(openai|anthropic)(\/.*)?$/.exec(url);
      if (llm) {
        const grant = this.attempts.resolve(llm[1]);
        if (!grant)
          return this.refused(res, 403, 'this attempt no longer holds the run (or the credential is not valid)');
        return await this.proxy.handle(req, res, grant, llm[2] as 'openai' | 'anthropic', llm[3] ?? '/');
      }
      const m = /^\/v1\/(steps|values)\/([^/?]+)(?:\/(start|finish))?$/.exec(url);
      if (!m) return fail(res, 404, 'onceflow: no such route');
      const auth = req.headers.authorization;
      const grant = this.attempts.resolve(auth?.startsWith('Bearer ') ? auth.slice(7) : undefined);
      if (!grant)
        return this.refused(
          res,
          auth ? 403 : 401,
          'this attempt no longer holds the run (or the credential is not valid)',
        );
      const name = m[2];
      // Names are plain ASCII ([A-Za-z0-9._:-]): taken as they stand, never percent-decoded.
      if (!STEP_NAME_PATTERN.test(name))
        return fail(res, 400, 'onceflow: names are 1-128 characters of [A-Za-z0-9._:-]');
      if (m[1] === 'steps' && req.method === 'POST' && m[3] === 'start') return await this.start(res, grant, name);
      if (m[1] === 'steps' && req.method === 'POST' && m[3] === 'finish')
        return await this.finish(req, res, grant, name);
      if (m[1] === 'values' && !m[3] && req.method === 'GET') return await this.get(res, grant, name);
      if (m[1] === 'values' && !m[3] && req.method === 'PUT') return await this.put(req, res, grant, name);
      return fail(res, 405, 'onceflow: method not allowed');
    } catch (err) {
      // Postgres unreachable and the like: the CLI exits 75 and the attempt is retried.
      const transient = isTransientDbError(err);
      this.logger.warn({ msg: 'worker API request failed', err: String((err as Error)?.message ?? err), transient });
      fail(res, 503, 'onceflow: the worker could not reach its database; retry the attempt');
    }
  }

  private refused(res: ServerResponse, status: number, message: string, grant?: AttemptGrant): void {
    this.metrics.steps.inc({ outcome: 'refused' });
    if (grant) grant.stats.refused++;
    fail(res, status, `onceflow: ${message}`);
  }

  private async start(res: ServerResponse, grant: AttemptGrant, name: string): Promise<void> {
    const r = await this.journal.begin(grant, name);
    if (r.kind === 'fenced') return this.refused(res, 409, 'this attempt no longer holds the run', grant);
    if (r.kind === 'replay') {
      this.metrics.steps.inc({ outcome: 'replayed' });
      grant.stats.replayed++;
      res
        .writeHead(200, {
          [STEP_STATE_HEADER]: 'done',
          'content-type': 'application/octet-stream',
          'content-length': r.output.length,
        })
        .end(r.output);
      return;
    }
    this.metrics.steps.inc({ outcome: 'executed' });
    grant.stats.executed++;
    res.writeHead(200, { [STEP_STATE_HEADER]: 'run', 'content-length': 0 }).end();
  }

  private async finish(req: IncomingMessage, res: ServerResponse, grant: AttemptGrant, name: string): Promise<void> {
    const exitCode = Number(req.headers[EXIT_CODE_HEADER]);
    if (!Number.isInteger(exitCode) || exitCode < 0 || exitCode > 255)
      return fail(res, 400, `onceflow: ${EXIT_CODE_HEADER} must be 0-255`);
    const output = await readBody(req, MAX_RECORDED_BYTES);
    if (!output) return fail(res, 413, `onceflow: recorded output over ${MAX_RECORDED_BYTES} bytes`);
    const r = await this.journal.finish(grant, name, exitCode, output);
    if (r.kind === 'fenced') return this.refused(res, 409, 'this attempt no longer holds the run', grant);
    res.writeHead(204).end();
  }

  private async get(res: ServerResponse, grant: AttemptGrant, key: string): Promise<void> {
    const r = await this.journal.getValue(grant, key);
    if (r.kind === 'fenced') return this.refused(res, 409, 'this attempt no longer holds the run', grant);
    if (r.kind === 'missing') return fail(res, 404, `onceflow: no value stored under ${key}`);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': r.value.length }).end(r.value);
  }

  private async put(req: IncomingMessage, res: ServerResponse, grant: AttemptGrant, key: string): Promise<void> {
    const value = await readBody(req, MAX_RECORDED_BYTES);
    if (!value) return fail(res, 413, `onceflow: a value is at most ${MAX_RECORDED_BYTES} bytes`);
    if (!(await this.journal.putValue(grant, key, value)))
      return this.refused(res, 409, 'this attempt no longer holds the run', grant);
    res.writeHead(204).end();
  }
}
