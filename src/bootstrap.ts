import { INestApplication, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { HttpErrorFilter } from './common/http-exception.filter';
import { openApiFrame } from './common/openapi';
import type { AppConfig } from './config/app-config';

/** Pipes, filters, body limits and OpenAPI: the same for `npm start` and for tests. */
export function configureApp(app: NestExpressApplication, config: AppConfig): void {
  app.useLogger(app.get(Logger));
  app.useBodyParser('json', { limit: config.webhookBodyLimitBytes });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  app.useGlobalFilters(new HttpErrorFilter());
  app.enableShutdownHooks();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, openApiFrame()), { jsonDocumentUrl: 'docs-json' });
}

export async function createApp(config: AppConfig): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.register(config), { rawBody: true, bufferLogs: true });
  configureApp(app, config);
  return app;
}
