import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { queryRows } from '../database/query-rows';
import type { SlackMessage } from './slack.client';

/** A row this deliverer holds. `attempts` (after the claim's increment) doubles as the claim's fencing token. */
export interface ClaimedNotification {
  id: string;
  runId: string;
  attempts: number;
  message: SlackMessage;
}

/** Why a claim did not happen: nothing left to do, or look again after `delayMs`. */
export type ClaimMiss = { kind: 'skip'; reason: string } | { kind: 'later'; delayMs: number; reason: string };

const MS = `* interval '1 millisecond'`;

/**
 * Every state change of an outbox row is ONE conditional statement (never read-then-write), so
 * two deliverers can never both believe they hold a row.
 */
@Injectable()
export class NotificationClaimsRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  /**
   * Takes a due PENDING row whose claim is free or lapsed (its holder died or froze), counts the
   * attempt and holds it for `leaseMs`. Rows out of attempts are left to the sweeper, which fails
   * them: their last attempt was interrupted and may or may not have reached Slack.
   */
  async claim(id: string, leaseMs: number, maxAttempts: number): Promise<ClaimedNotification | null> {
    const rows = await queryRows<{ id: string; run_id: string; attempts: number; message: SlackMessage }>(
      this.ds,
      `UPDATE notification_logs
          SET attempts = attempts + 1, claimed_until = now() + $2 ${MS}, updated_at = now()
        WHERE id = $1 AND status = 'PENDING' AND next_attempt_at <= now()
          AND (claimed_until IS NULL OR claimed_until < now()) AND attempts < $3
        RETURNING id, run_id, attempts, message`,
      [id, leaseMs, maxAttempts],
    );
    const r = rows[0];
    return r ? { id: r.id, runId: r.run_id, attempts: r.attempts, message: r.message } : null;
  }

  async whyNot(id: string, maxAttempts: number): Promise<ClaimMiss> {
    const rows: Array<{ status: string; attempts: number; due_ms: number; claim_ms: number | null }> =
      await this.ds.query(
        `SELECT status, attempts,
              EXTRACT(EPOCH FROM (next_attempt_at - now())) * 1000 AS due_ms,
              EXTRACT(EPOCH FROM (claimed_until - now())) * 1000 AS claim_ms
         FROM notification_logs WHERE id = $1`,
        [id],
      );
    const r = rows[0];
    if (!r) return { kind: 'skip', reason: 'no such notification' };
    if (r.status !== 'PENDING') return { kind: 'skip', reason: `already ${r.status}` };
    const claimMs = r.claim_ms === null ? 0 : Number(r.claim_ms);
    if (claimMs > 0)
      return { kind: 'later', delayMs: Math.ceil(claimMs) + 100, reason: 'claimed by another deliverer' };
    if (r.attempts >= maxAttempts) return { kind: 'skip', reason: 'out of attempts (the sweeper fails it)' };
    return {
      kind: 'later',
      delayMs: Math.max(20, Math.ceil(Number(r.due_ms)) + 20),
      reason: 'next attempt not due yet',
    };
  }

  /** Heartbeat: keeps our claim alive; false = the claim is no longer ours (taken over or finished). */
  async extend(claim: ClaimedNotification, leaseMs: number): Promise<boolean> {
    const rows = await queryRows(
      this.ds,
      `UPDATE notification_logs SET claimed_until = now() + $3 ${MS}
        WHERE id = $1 AND status = 'PENDING' AND attempts = $2 RETURNING id`,
      [claim.id, claim.attempts, leaseMs],
    );
    return rows.length > 0;
  }

  /**
   * Slack answered 200: record it whoever holds the claim now — the message IS posted, and
   * recording it stops any other deliverer from posting it again. A FAILED row (a late answer to
   * an attempt given up on) becomes SENT too, because that is the truth.
   */
  async markSent(id: string): Promise<boolean> {
    const rows = await queryRows(
      this.ds,
      `UPDATE notification_logs
          SET status = 'SENT', sent_at = now(), claimed_until = NULL, last_error = NULL, updated_at = now()
        WHERE id = $1 AND status IN ('PENDING', 'FAILED') RETURNING id`,
      [id],
    );
    return rows.length > 0;
  }

  /** A failed attempt, fenced by the claim: a deliverer whose claim was taken over records nothing. */
  async markRetry(claim: ClaimedNotification, delayMs: number, error: string): Promise<boolean> {
    const rows = await queryRows(
      this.ds,
      `UPDATE notification_logs
          SET next_attempt_at = now() + $3 ${MS}, claimed_until = NULL, last_error = $4, updated_at = now()
        WHERE id = $1 AND status = 'PENDING' AND attempts = $2 RETURNING id`,
      [claim.id, claim.attempts, delayMs, error],
    );
    return rows.length > 0;
  }

  async markFailed(claim: ClaimedNotification, error: string): Promise<boolean> {
    const rows = await queryRows(
      this.ds,
      `UPDATE notification_logs SET status = 'FAILED', claimed_until = NULL, last_error = $3, updated_at = now()
        WHERE id = $1 AND status = 'PENDING' AND attempts = $2 RETURNING id`,
      [claim.id, claim.attempts, error],
    );
    return rows.length > 0;
  }

  /** Due rows nobody holds and nothing claimed for `graceMs`: their job was lost (or never made). */
  async lost(graceMs: number, maxAttempts: number, limit: number): Promise<Array<{ id: string; attempts: number }>> {
    return this.ds.query(
      `SELECT id, attempts FROM notification_logs
        WHERE status = 'PENDING' AND next_attempt_at <= now() - $1 ${MS}
          AND (claimed_until IS NULL OR claimed_until < now()) AND attempts < $2
        ORDER BY next_attempt_at LIMIT $3`,
      [graceMs, maxAttempts, limit],
    );
  }

  /** Rows whose final attempt was interrupted (the worker died holding the claim): FAILED, outcome unknown. */
  async failExhausted(maxAttempts: number): Promise<number> {
    const rows = await queryRows(
      this.ds,
      `UPDATE notification_logs
          SET status = 'FAILED', claimed_until = NULL, updated_at = now(),
              last_error = 'the last attempt was interrupted (deliverer died); it may or may not have reached Slack'
        WHERE status = 'PENDING' AND attempts >= $1 AND (claimed_until IS NULL OR claimed_until < now())
        RETURNING id`,
      [maxAttempts],
    );
    return rows.length;
  }
}
