import { Injectable } from '@nestjs/common';
import { OnceflowBin } from './onceflow-bin';
import { AttemptGrant, AttemptStats, RunAttempts } from './run-attempts';
import { WorkerApiServer } from './worker-api.server';

export interface CommandAccessHandle {
  /** Variables and PATH directory for the attempt's command. */
  runApi: { env: Record<string, string>; binDir: string };
  stats: AttemptStats;
  /** Revokes the attempt's credential. */
  close(): void;
  /** The text with the attempt's credential replaced: what the command printed is served and posted. */
  redact(text: string): string;
}

export const REDACTED_CREDENTIAL = '[onceflow credential redacted]';

/**
 * What an attempt's command gets to talk to its worker: the worker API's address, a credential
 * for this attempt only, the LLM proxy's base URLs (the credential is part of them: the SDKs'
 * own Authorization header carries the provider's API key), and the `onceflow` CLI on its PATH.
 */
@Injectable()
export class CommandAccess {
  constructor(
    private readonly attempts: RunAttempts,
    private readonly api: WorkerApiServer,
    private readonly bin: OnceflowBin,
  ) {}

  async open(grant: Omit<AttemptGrant, 'stats'>): Promise<CommandAccessHandle> {
    const url = await this.api.url();
    const { token, grant: full, close } = this.attempts.open(grant);
    return {
      runApi: {
        binDir: this.bin.dir,
        env: {
          ONCEFLOW_URL: url,
          ONCEFLOW_RUN_TOKEN: token,
          OPENAI_BASE_URL: `${url}/llm/${token}/openai`,
          ANTHROPIC_BASE_URL: `${url}/llm/${token}/anthropic`,
        },
      },
      stats: full.stats,
      close,
      // A command that prints its environment must not hand the credential to whoever reads the
      // run (API answers, Slack). Revoked by then, but a credential is never shown, live or not.
      redact: (text) => redactCredential(text, token),
    };
  }
}

/** "steps: 2 run, 2 replayed; LLM: 1 upstream, 3 cached" — for the attempt's finalize reason. */
export function describeStats(s: AttemptStats): string {
  const parts: string[] = [];
  if (s.executed || s.replayed || s.refused) {
    parts.push(`steps: ${s.executed} run, ${s.replayed} replayed${s.refused ? `, ${s.refused} refused` : ''}`);
  }
  if (s.llmUpstream || s.llmCached) parts.push(`LLM: ${s.llmUpstream} upstream, ${s.llmCached} cached`);
  return parts.join('; ');
}

/**
 * Every occurrence of the credential, and the end of one the output tail cut at its start (the
 * tail keeps the last bytes: a token printed just before the cut survives only as a suffix).
 */
export function redactCredential(text: string, token: string): string {
  let out = text.split(token).join(REDACTED_CREDENTIAL);
  for (let keep = token.length - 1; keep >= 8; keep--) {
    if (out.startsWith(token.slice(-keep))) {
      out = REDACTED_CREDENTIAL + out.slice(keep);
      break;
    }
  }
  return out;
}
