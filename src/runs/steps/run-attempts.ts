import { Injectable } from '@nestjs/common';
import { createHash, randomBytes } from 'node:crypto';
import type { AttemptRef } from './step-journal.repository';

/** What a run's command may act for: one attempt of one run, while that attempt lasts. */
export interface AttemptGrant extends AttemptRef {
  projectId: string;
  /** Aborted when the attempt loses its lease (the credential stops working at once). */
  signal: AbortSignal;
  stats: AttemptStats;
}

/** What the attempt's command did through its worker (the finalize reason summarises it). */
export interface AttemptStats {
  executed: number;
  replayed: number;
  refused: number;
  llmUpstream: number;
  llmCached: number;
}

export interface OpenAttempt {
  /** The credential handed to the command (ONCEFLOW_RUN_TOKEN); never logged, never stored. */
  token: string;
  grant: AttemptGrant;
  /** Revokes the credential (the attempt ended, or its process group is gone). */
  close(): void;
}

const digest = (token: string) => createHash('sha256').update(token).digest('base64url');

/**
 * The credentials of the attempts this worker runs right now. A credential is a random secret
 * that exists only in this process's memory (kept by its hash) and in the environment of the
 * attempt's command: valid from the claim until the attempt ends or its lease is lost. A later
 * attempt — here or on another worker — gets a new one; a finished, cancelled or taken-over
 * attempt's credential is simply unknown. The step journal's statements check the fencing token
 * again in Postgres, so a credential that outlived its lease by a moment still records nothing.
 */
@Injectable()
export class RunAttempts {
  private readonly byDigest = new Map<string, AttemptGrant>();

  open(grant: Omit<AttemptGrant, 'stats'>): OpenAttempt {
    const token = `ofr_${randomBytes(32).toString('base64url')}`;
    const key = digest(token);
    const full: AttemptGrant = {
      ...grant,
      stats: { executed: 0, replayed: 0, refused: 0, llmUpstream: 0, llmCached: 0 },
    };
    const close = () => {
      this.byDigest.delete(key);
      grant.signal.removeEventListener('abort', close);
    };
    if (!grant.signal.aborted) {
      this.byDigest.set(key, full);
      grant.signal.addEventListener('abort', close, { once: true });
    }
    return { token, grant: full, close };
  }

  /** The live attempt a credential stands for, or undefined (unknown, ended, lease lost). */
  resolve(token: string | undefined): AttemptGrant | undefined {
    if (!token || token.length > 200) return undefined;
    const grant = this.byDigest.get(digest(token));
    return grant && !grant.signal.aborted ? grant : undefined;
  }

  get size(): number {
    return this.byDigest.size;
  }
}
