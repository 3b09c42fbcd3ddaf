import { INestApplication, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { OnceflowExpressAdapter } from './http/express-adapter';
import { HttpErrorFilter } from './http/http-error.filter';
import { openApiFrame } from './common/openapi';
import { jsonBodyParser } from './common/json-body';
import type { AppConfig } from './config/app-config';

/** Pipes, filters, body limits and OpenAPI: the same for `npm start` and for tests. */
export function configureApp(app: NestExpressApplication, config: AppConfig): void {
  app.useLogger(app.get(Logger));
  // Keeps the raw bytes (rawBody) like Nest's own parser, and refuses absurd nesting before parsing.
  app.use(jsonBodyParser(config.plane.bodyLimitBytes));
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  app.useGlobalFilters(new HttpErrorFilter());
  app.enableShutdownHooks();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, openApiFrame()), {
    jsonDocumentUrl: 'docs-json',
  });
}

export async function createApp(config: AppConfig): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(
    AppModule.register(config),
    new OnceflowExpressAdapter(),
    {
      rawBody: true,
      bufferLogs: true,
    },
  );
  configureApp(app, config);
  return app;
}

/**
 * How many connections the kernel may hold for us before we accept them (capped by
 * net.core.somaxconn). Node's default, 511, overflows when a burst of senders (a webhook storm,
 * a load balancer's reconnects) arrives while the event loop is busy: Linux then drops the SYN and
 * the sender retries it only after 1 s, then 3 s, so a short stall turns into seconds of latency.
 */
export const LISTEN_BACKLOG = 4096;

/** Nest's typings stop at (port, hostname); its adapter passes further arguments to Node's listen. */
type ListenWithBacklog = (port: number, hostname: string | undefined, backlog: number) => Promise<unknown>;

export async function listen(app: INestApplication, port: number): Promise<void> {
  await (app.listen as unknown as ListenWithBacklog).call(app, port, undefined, LISTEN_BACKLOG);
}
