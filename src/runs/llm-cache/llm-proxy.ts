import { Inject, Injectable, Logger } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppConfig } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.module';
import { MetricsService } from '../../metrics/metrics.service';
import type { AttemptGrant } from '../steps/run-attempts';
import { Flight, FlightSink } from './flight';
import { LlmCacheRepository } from './llm-cache.repository';
import { answerHeaders, encoded, fail, headerString, readBody, upstreamUrl } from './proxy-http';
import { UpstreamClient } from './upstream-client';
import { LlmProvider, requestKey } from './request-key';

/** A request body larger than this is refused (413): no LLM request is near it. */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
export const CACHE_HEADER = 'x-onceflow-cache';

type CacheResult = 'hit' | 'miss' | 'coalesced';

/**
 * The caching reverse proxy a run's command reaches through OPENAI_BASE_URL / ANTHROPIC_BASE_URL.
 * A POST whose provider, path and JSON body equal an earlier 2xx answer's within the scope is
 * answered from Postgres byte for byte; identical requests in flight at once share ONE upstream
 * call; everything else is forwarded as is. Only the two configured upstreams are ever contacted,
 * and the request's headers (the provider API key among them) are forwarded, never stored, never
 * logged.
 */
@Injectable()
export class LlmProxy {
  private readonly logger = new Logger(LlmProxy.name);
  private readonly flights = new Map<string, Flight>();
  private readonly upstream = new UpstreamClient();

  constructor(
    private readonly cache: LlmCacheRepository,
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** `rest` is what follows `/<provider>` in the proxy URL: the upstream path and query. */
  async handle(
    req: IncomingMessage,
    res: ServerResponse,
    grant: AttemptGrant,
    provider: LlmProvider,
    rest: string,
  ): Promise<void> {
    const target = upstreamUrl(
      provider === 'openai' ? this.config.llm.openaiUpstream : this.config.llm.anthropicUpstream,
      rest,
    );
    if (!target) return fail(res, 400, 'onceflow: this path does not map to the configured upstream');
    const body = await readBody(req, MAX_REQUEST_BYTES);
    if (!body) return fail(res, 413, `onceflow: request body over ${MAX_REQUEST_BYTES} bytes`);
    const key =
      req.method === 'POST' && this.config.llm.cacheScope !== 'off'
        ? requestKey(provider, target.path, body)
        : undefined;
    if (!key) {
      this.metrics.llmCache.inc({ provider, result: 'miss' });
      return this.forward(req, res, grant, provider, target.url, body);
    }
    const scope = this.config.llm.cacheScope === 'project' ? `project:${grant.projectId}` : `run:${grant.runId}`;
    const flightKey = `${scope}|${key.hash}`;
    const current = this.flights.get(flightKey);
    if (current?.joinable) {
      // Ended: the answer is complete and being stored — as good as a cache hit.
      const result = current.ended ? 'hit' : 'coalesced';
      this.count(grant, provider, result);
      return this.serve(res, current, result);
    }
    // Registered before any await: an identical request arriving meanwhile joins this one.
    const flight = new Flight(Math.max(this.config.llm.cacheMaxBytes, 1));
    this.flights.set(flightKey, flight);
    const served = this.serve(res, flight, 'miss');
    try {
      const cached = await this.cache.lookup(scope, key.hash);
      if (cached) {
        this.count(grant, provider, 'hit');
        res.setHeader(CACHE_HEADER, 'hit');
        flight.setHead({
          status: cached.status,
          headers: { 'content-type': cached.contentType ?? undefined, 'content-length': String(cached.body.length) },
        });
        flight.push(cached.body);
        flight.end();
        return await served;
      }
      this.count(grant, provider, 'miss');
      await this.callUpstream(req, grant, provider, target.url, body, flight);
      await served;
      const head = flight.head;
      const answer = flight.body;
      if (
        head &&
        head.status >= 200 &&
        head.status < 300 &&
        answer &&
        answer.length <= this.config.llm.cacheMaxBytes &&
        !encoded(head)
      ) {
        const stored = await this.cache.store(grant, {
          scope,
          hash: key.hash,
          provider,
          path: target.path,
          status: head.status,
          contentType: headerString(head.headers['content-type']),
          body: answer,
          ttlMs: this.config.llm.cacheTtlMs,
        });
        if (!stored)
          this.logger.warn({
            msg: 'LLM answer not cached: the attempt no longer holds its run',
            runId: grant.runId,
            provider,
          });
      }
    } catch (err) {
      if (!flight.head) flight.fail(err as Error);
      this.logger.warn({
        msg: 'LLM proxy request failed',
        runId: grant.runId,
        provider,
        err: String((err as Error).message ?? err),
      });
    } finally {
      if (this.flights.get(flightKey) === flight) this.flights.delete(flightKey);
    }
  }

  private count(grant: AttemptGrant, provider: LlmProvider, result: CacheResult): void {
    this.metrics.llmCache.inc({ provider, result });
    if (result !== 'miss') grant.stats.llmCached++;
  }

  /** Streams the flight to one client; resolves when the client has its answer or went away. */
  private serve(res: ServerResponse, flight: Flight, result: CacheResult): Promise<void> {
    return new Promise<void>((resolve) => {
      const sink: FlightSink = {
        head: (h) => {
          if (res.headersSent) return;
          res.setHeader(CACHE_HEADER, res.getHeader(CACHE_HEADER) ?? result);
          res.writeHead(h.status, answerHeaders(h));
        },
        chunk: (c) => void res.write(c),
        end: () => res.end(resolve),
        fail: (err) => {
          if (!res.headersSent) fail(res, 502, `onceflow: upstream request failed: ${err.message}`);
          else res.destroy(err);
          resolve();
        },
      };
      // A client that goes away stops receiving; the upstream call goes on for the others and the cache.
      res.once('close', () => {
        flight.leave(sink);
        resolve();
      });
      flight.join(sink);
    });
  }

  /** One upstream call feeding the flight; resolves when the answer has ended. */
  private callUpstream(
    req: IncomingMessage,
    grant: AttemptGrant,
    provider: LlmProvider,
    url: URL,
    body: Buffer,
    flight: Flight,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.upstream.send(
        req,
        url,
        body,
        (upRes) => {
          this.countAnswer(provider, grant, upRes);
          flight.setHead({ status: upRes.statusCode ?? 502, headers: upRes.headers });
          upRes.on('data', (c: Buffer) => flight.push(c));
          upRes.once('end', () => {
            flight.end();
            resolve();
          });
          upRes.once('error', (err) => {
            flight.fail(err);
            reject(err);
          });
        },
        (err) => {
          if (!flight.head) this.metrics.llmUpstreamCalls.inc({ provider, status: 'error' });
          flight.fail(err);
          reject(err);
        },
      );
    });
  }

  /** An upstream answer's head arrived: counted once, whether it feeds a flight or is forwarded. */
  private countAnswer(provider: LlmProvider, grant: AttemptGrant, upRes: IncomingMessage): void {
    this.metrics.llmUpstreamCalls.inc({ provider, status: `${Math.floor((upRes.statusCode ?? 0) / 100)}xx` });
    grant.stats.llmUpstream++;
  }

  /** Not cacheable (not a JSON POST, or the cache is off): forwarded as is, aborted with its client. */
  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    grant: AttemptGrant,
    provider: LlmProvider,
    url: URL,
    body: Buffer,
  ): Promise<void> {
    return new Promise<void>((resolve) => {
      const up = this.upstream.send(
        req,
        url,
        body,
        (upRes) => {
          this.countAnswer(provider, grant, upRes);
          res.setHeader(CACHE_HEADER, 'miss');
          res.writeHead(
            upRes.statusCode ?? 502,
            answerHeaders({ status: upRes.statusCode ?? 502, headers: upRes.headers }),
          );
          upRes.pipe(res);
          upRes.once('end', () => resolve());
          upRes.once('error', () => resolve());
        },
        (err) => {
          this.metrics.llmUpstreamCalls.inc({ provider, status: 'error' });
          if (!res.headersSent) fail(res, 502, `onceflow: upstream request failed: ${err.message}`);
          else res.destroy();
          resolve();
        },
      );
      res.once('close', () => {
        if (!res.writableFinished) up.destroy();
        resolve();
      });
    });
  }
}
