import { applyDecorators } from '@nestjs/common';
import { ApiOperation, ApiProperty, ApiResponse, DocumentBuilder, OpenAPIObject } from '@nestjs/swagger';

/**
 * The one error shape every 4xx/5xx answer has (HttpErrorFilter, the admin auth middleware).
 * Documented on each error status a route can answer, so a generated client can type it.
 */
export class ErrorResponse {
  @ApiProperty({ type: 'integer', example: 404, description: 'The HTTP status, repeated' })
  statusCode: number;

  @ApiProperty({ example: 'Not Found', description: 'The status text' })
  error: string;

  @ApiProperty({
    example: 'run 5f0c2a9e-1f1b-4c1e-9d0a-2f8a4f1d7c11 not found',
    description: 'What went wrong, for people',
  })
  message: string;
}

export type ErrorStatus = 400 | 401 | 404 | 409 | 413 | 422 | 503;

/**
 * Documents error answers, each with the ErrorResponse schema:
 * `@ApiErrors({ 404: 'No such run', 409: 'The run already finished' })`.
 */
export function ApiErrors(errors: Partial<Record<ErrorStatus, string>>): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ...Object.entries(errors).map(([status, description]) =>
      ApiResponse({ status: Number(status), description, type: ErrorResponse }),
    ),
  );
}

/**
 * A route that takes no credential: probes and scrapes, and the Plane webhook (its signature header
 * is its credential). `security: []` says so in the document, instead of leaving it unsaid.
 */
export function ApiPublic(summary: string): MethodDecorator {
  return ApiOperation({ summary, security: [] });
}

/** Every tag a controller uses, with the line the OpenAPI UI shows under it. */
const TAGS: Array<[string, string]> = [
  ['projects', 'Projects and the runs created in them'],
  ['runs', 'Runs: list, inspect, dispatch, retry, cancel'],
  ['tasks', 'Tasks created from external work items (Plane), with their authoring run'],
  ['notifications', 'Slack notifications of finished runs (the outbox)'],
  ['webhooks', 'Plane webhook intake and the recorded deliveries'],
  ['health', 'Probes and metrics (no credentials)'],
];

/** The document's frame: what it is, where it is served, and the bearer scheme of /api/*. */
export function openApiFrame(): Omit<OpenAPIObject, 'paths'> {
  const builder = new DocumentBuilder()
    .setTitle('onceflow')
    .setDescription('Exactly-once orchestrator runs and Plane webhook intake')
    .setVersion('0.1.0')
    // Relative: the instance that served this document, whatever host and port it is reached on.
    .addServer('/', 'This onceflow instance')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'One of API_KEYS' }, 'bearer');
  for (const [name, description] of TAGS) builder.addTag(name, description);
  return builder.build();
}

/**
 * The `enum` of a nullable enum property. OpenAPI 3.0 checks `enum` on its own, so null must be one
 * of the values or a null answer fails validation against its own document.
 */
export function orNull<T extends string>(values: readonly T[]): Array<T | null> {
  return [...values, null];
}
