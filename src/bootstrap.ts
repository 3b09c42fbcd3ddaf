import { INestApplication, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
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
  const app = await NestFactory.create<NestExpressApplication>(AppModule.register(config), {
    rawBody: true,
    bufferLogs: true,
  });
  configureApp(app, config);
  return app;
}
