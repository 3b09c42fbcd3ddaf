import { invalidPayload } from './webhooks.errors';
import { MAX_JSON_DEPTH } from '../common/json-body';
import { jsonStorageProblem, storableCopy } from '../database/storable-json';
import { PLANE } from './plane-event-handler';
import { PlaneEvent, parsePlaneEvent } from './plane-payload';
import { NewDelivery } from './webhook-deliveries.repository';

/** A verified Plane body, read and ready to be recorded. */
export interface PlaneDelivery {
  dedupeKey: string;
  externalDeliveryId: string | null;
  event: PlaneEvent;
  /** What is stored: the body as it came, or a cleaned copy when Postgres cannot store it as it is. */
  payload: Record<string, unknown>;
}

/** Why a delivery was recorded as ignored although it parsed: its body could only be stored cleaned. */
export const UNSTORABLE_REASONS: ReadonlySet<string> = new Set([
  'unstorable_nul_character',
  'unstorable_lone_surrogate',
]);

/**
 * Reads a verified body. Nested deeper than MAX_JSON_DEPTH: 400, nothing stored (the body parser
 * usually refused it already). With NUL characters or lone surrogates anywhere (Postgres refuses
 * both, in jsonb and text): recorded as an ignored delivery whose payload is a copy with those
 * characters replaced by U+FFFD — the operator sees it, and it never becomes a task, because what
 * we would act on is not what Plane sent. A 400 names a missing field, as for any body.
 */
export function readPlaneDelivery(
  body: unknown,
  dedupeKeyOf: (e: PlaneEvent) => string,
  externalDeliveryId: string | null,
): PlaneDelivery {
  const problem = jsonStorageProblem(body, MAX_JSON_DEPTH);
  if (problem === 'too_deep') throw invalidPayload(`body nests deeper than ${MAX_JSON_DEPTH} levels`);
  const payload = problem === null ? body : storableCopy(body);
  const event = parsePlaneEvent(payload, problem === null ? undefined : `unstorable_${problem}`);
  return { dedupeKey: dedupeKeyOf(event), externalDeliveryId, event, payload: payload as Record<string, unknown> };
}

export function deliveryRow(d: PlaneDelivery): NewDelivery {
  return {
    provider: PLANE,
    dedupeKey: d.dedupeKey,
    externalDeliveryId: d.externalDeliveryId,
    payloadVersion: d.event.version,
    event: d.event.event,
    action: d.event.action,
    workItemId: d.event.workItemId,
    actorId: d.event.actorId,
    payload: d.payload,
  };
}
