import { Controller, Headers, Post, Req, Res } from '@nestjs/common';
import type { RawBodyRequest } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBadRequestResponse,
  ApiHeader,
  ApiOkResponse,
  ApiPayloadTooLargeResponse,
  ApiServiceUnavailableResponse,
  ApiTags,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { PlaneIntakeService } from './plane-intake.service';

/** No bearer token here: the HMAC signature over the raw body is the credential. */
@ApiTags('webhooks')
@Controller('webhooks')
export class PlaneWebhookController {
  constructor(private readonly intake: PlaneIntakeService) {}

  @Post('plane')
  @ApiHeader({ name: 'X-Plane-Signature', required: true, description: 'lowercase hex HMAC-SHA256 of the raw body' })
  @ApiHeader({ name: 'X-Plane-Delivery', required: false, description: 'per-attempt id (recorded, not used for dedupe)' })
  @ApiAcceptedResponse({
    description:
      '{ status: "accepted" | "ignored", deliveryId, reason? }; { status: "accepted", spooled: true } while Postgres is unreachable ' +
      '(kept in a Redis spool, processed once when it is back); "ignored" with reason unstorable_nul_character / ' +
      'unstorable_lone_surrogate for a body Postgres cannot store as it is (recorded cleaned, never a task)',
  })
  @ApiOkResponse({ description: '{ status: "duplicate", deliveryId }: a retry, or the work item already has its task' })
  @ApiBadRequestResponse({ description: 'Not JSON, nested deeper than 128 levels, or without data.id / the fields the event needs' })
  @ApiUnauthorizedResponse({ description: 'Missing, malformed or wrong signature' })
  @ApiPayloadTooLargeResponse({ description: 'Body over WEBHOOK_BODY_LIMIT_BYTES (1 MiB)' })
  @ApiServiceUnavailableResponse({ description: 'PLANE_WEBHOOK_SECRETS is not set, or Postgres and the Redis spool are both unreachable' })
  async plane(
    @Req() req: RawBodyRequest<Request>,
    @Res() res: Response,
    @Headers('x-plane-signature') signature: string | undefined,
    @Headers('x-plane-delivery') deliveryHeader: string | undefined,
  ): Promise<void> {
    const answer = await this.intake.receive({ rawBody: req.rawBody, body: req.body, signature, deliveryHeader });
    // Written directly: Express's json() would hash the body for an ETag nobody revalidates here
    // (~40 µs of a delivery's CPU with its other checks).
    const json = JSON.stringify(answer.body);
    res.writeHead(answer.httpStatus, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json) }).end(json);
  }
}
