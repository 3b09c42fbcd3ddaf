import type { INestApplication } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import type { NotificationEventType } from '../../src/notifications/notification-log.entity';
import { OutboxWriter } from '../../src/notifications/outbox.writer';

/** An outbox row written by the real writer in its own transaction; its run id is the Slack stub's key. */
export async function pendingOutboxRow(
  app: INestApplication,
  eventType: NotificationEventType,
  textPrefix: string,
): Promise<{ id: string; runId: string }> {
  const runId = randomUUID();
  const id = await app
    .get<DataSource>(getDataSourceToken())
    .transaction((em) => app.get(OutboxWriter).add(em, { runId, eventType, text: `${textPrefix} ${runId}` }));
  return { id: id!, runId };
}
