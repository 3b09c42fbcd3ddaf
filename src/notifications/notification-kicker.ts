import { Injectable } from '@nestjs/common';

/**
 * Starts delivery of a freshly committed outbox row without waiting for the sweeper. Failing to
 * kick loses nothing: the row is PENDING in Postgres and the sweeper finds it.
 */
@Injectable()
export class NotificationKicker {
  async kick(_notificationId: string): Promise<void> {
    // Delivery is wired by the notifications delivery side (queue + sweeper).
  }
}
