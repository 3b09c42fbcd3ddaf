import { BullAdapter } from '@bull-board/api/bullAdapter';
import { ExpressAdapter } from '@bull-board/express';
import { BullBoardModule } from '@bull-board/nestjs';
import { DynamicModule, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { AppRole, roleServesApi } from '../config/roles';
import { APP_CONFIG } from '../config/config.module';
import { ALL_QUEUES } from '../queues/queue-names';
import { adminSecurityMiddleware } from './admin-headers';
import { adminAuthMiddleware } from './basic-auth';

export const ADMIN_ROUTE = '/admin/queues';

/**
 * Bull Board for every queue, only in processes that serve the API. The auth middleware goes in
 * Bull Board's own `middleware` option: the root module mounts it and the board's Express router
 * in ONE `apply(...).forRoutes(route)`, i.e. `app.use(route, auth, board)`, so auth runs first on
 * the page and on every sub-path (JSON API, static assets). A separate NestModule middleware
 * would depend on module init order.
 */
@Module({})
export class AdminModule {
  static register(role: AppRole): DynamicModule {
    if (!roleServesApi(role)) return { module: AdminModule };
    return {
      module: AdminModule,
      imports: [
        BullBoardModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({
            route: ADMIN_ROUTE,
            adapter: ExpressAdapter,
            // Framing headers and the same-origin check first: they hold for 401 and 503 answers too.
            middleware: [
              adminSecurityMiddleware(),
              adminAuthMiddleware({ user: config.auth.adminUser, password: config.auth.adminPassword }),
            ],
            boardOptions: { uiConfig: { boardTitle: 'onceflow' } },
          }),
        }),
        BullBoardModule.forFeature(...ALL_QUEUES.map((name) => ({ name, adapter: BullAdapter }))),
      ],
    };
  }
}
