import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import type { NestApplicationOptions } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Express } from 'express';

/**
 * Nest's Express adapter, with one change: the HTTP server creates each request and response as
 * instances of classes whose prototypes ARE the Express app's (`app.request`, `app.response`),
 * instead of plain Node ones.
 *
 * Why: Express gives every request its methods by `Object.setPrototypeOf(req, app.request)`, and
 * the same for the response. On an object that already has that prototype the call does nothing;
 * on Node's own objects it changes their hidden class, and V8 then allocates ~2.8 × as much per
 * request and keeps about a fifth of it alive through the next scavenge, promoting it. At a few
 * hundred requests a second that filled the old space every ~2 s, and each of those mark-compacts
 * stalled the API for tens of milliseconds: it was the open loop's tail (docs/benchmarks.md,
 * "Requests born with Express's prototypes").
 *
 * The classes are real subclasses (`extends`), not functions returning `Reflect.construct(…)`:
 * V8 treats those like the setPrototypeOf case. Their prototypes are put in front of the app's,
 * so every Express method, `req.app` included, is found as before. A mounted sub-app (Bull Board)
 * still swaps in its own prototypes for its requests (and Express swaps the app's back in if the
 * sub-app passes a request on).
 *
 * Node's `createServer` takes the classes to instantiate; nothing else about the server changes.
 * The options onceflow never passes (HTTPS, 503 on closing, forced close) are refused, so that
 * they cannot be silently dropped.
 */
export class OnceflowExpressAdapter extends ExpressAdapter {
  initHttpServer(options: NestApplicationOptions): void {
    const unsupported = (['httpsOptions', 'return503OnClosing', 'forceCloseConnections'] as const).filter(
      (k) => options?.[k],
    );
    if (unsupported.length) throw new Error(`OnceflowExpressAdapter does not support ${unsupported.join(', ')}`);
    const app = this.getInstance<Express>();
    class Request extends IncomingMessage {}
    class Response extends ServerResponse {}
    Object.setPrototypeOf(Request.prototype, app.request);
    Object.setPrototypeOf(Response.prototype, app.response);
    app.request = Request.prototype as unknown as Express['request'];
    app.response = Response.prototype as unknown as Express['response'];
    this.setHttpServer(createServer({ IncomingMessage: Request, ServerResponse: Response }, app));
  }
}
