import { Controller, Headers, Post, Req, Res } from '@nestjs/common';
import type { RawBodyRequest } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBody, ApiHeader, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiErrors, ApiPublic } from '../common/openapi';
import { PlaneIntakeService } from './plane-intake.service';
import { PlaneWebhookAnswer } from './plane-webhook.view';

/** No bearer token here: the HMAC signature over the raw body is the credential. */
@ApiTags('webhooks')
@Controller('webhooks')
export class PlaneWebhookController {
  constructor(private readonly intake: PlaneIntakeService) {}

  @Post('plane')
  @ApiPublic('Receive a Plane webhook (credential: the X-Plane-Signature header, not a bearer token)')
  @ApiHeader({
    name: 'X-Plane-Signature',
    required: true,
    description:
      'The credential of this route: lowercase hex HMAC-SHA256 of the raw body with one of PLANE_WEBHOOK_SECRETS',
  })
  @ApiHeader({
    name: 'X-Plane-Delivery',
    required: false,
    description: 'per-attempt id (recorded, not used for dedupe)',
  })
  @ApiBody({
    description: "Plane's webhook payload (v1 or v2), exactly as signed",
    schema: { type: 'object', additionalProperties: true },
  })
  @ApiAcceptedResponse({
    description:
      'Accepted; or accepted with spooled: true while Postgres is unreachable (kept in a Redis spool, processed once when it is back); ' +
      'or ignored with a reason (unstorable_nul_character / unstorable_lone_surrogate: recorded cleaned, never a task)',
    type: PlaneWebhookAnswer,
  })
  @ApiOkResponse({
    description: 'status "duplicate": a retry, or the work item already has its task',
    type: PlaneWebhookAnswer,
  })
  @ApiErrors({
    400: 'Not JSON, nested deeper than 128 levels, or without data.id / the fields the event needs',
    401: 'Missing, malformed or wrong signature',
    413: 'Body over WEBHOOK_BODY_LIMIT_BYTES (1 MiB)',
    503: 'PLANE_WEBHOOK_SECRETS is not set, or Postgres and the Redis spool are both unreachable',
  })
  async plane(
    @Req() req: RawBodyRequest<Request>,
    @Res() res: Response,
    @Headers('x-plane-signature') signature: string | undefined,
    @Headers('x-plane-delivery') deliveryHeader: string | undefined,
  ): Promise<void> {
    const answer = await this.intake.receive({ rawBody: req.rawBody, body: req.body, signature, deliveryHeader });
    // Written directly: Express's json() would hash the body for an ETag nobody revalidates here.
    const json = JSON.stringify(answer.body);
    res
      .writeHead(answer.httpStatus, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(json),
      })
      .end(json);
  }
}
