import {
  applyDecorators,
  CanActivate,
  ExecutionContext,
  Inject,
  Injectable,
  UnauthorizedException,
  UseGuards,
} from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import type { Request } from 'express';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { ApiErrors } from './openapi';
import { safeEqual } from './safe-equal';

/** Bearer API keys on /api/*; compared in constant time against each configured key. */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    // Compare against every key (no early exit) so timing does not tell which one nearly matched.
    let ok = false;
    if (match) for (const key of this.config.auth.apiKeys) ok = safeEqual(match[1], key) || ok;
    if (!ok) throw new UnauthorizedException('missing or invalid bearer token');
    return true;
  }
}

/**
 * On every /api controller: the guard, and in the OpenAPI document the bearer requirement and the
 * 401 it answers, on each operation. One decorator, so the guard and its description cannot drift.
 */
export function RequireApiKey(): ClassDecorator {
  return applyDecorators(
    UseGuards(ApiKeyGuard),
    ApiBearerAuth(),
    ApiErrors({ 401: 'Missing or invalid bearer token' }),
  );
}
