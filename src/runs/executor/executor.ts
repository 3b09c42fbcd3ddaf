export interface ExecutionRequest {
  runId: string;
  attempt: number;
  fencingToken: string;
  requirement: string;
  projectId: string;
  projectName: string;
  projectWorkspace: string;
  taskId: string | null;
  /** Where the command runs: the task's workspace, else the project's. */
  workspace: string;
  idempotencyKey: string;
  timeoutMs: number;
  /**
   * Until when (ms since the epoch) the command may run without a keep-alive: the lease's validity
   * less a margin. Asked again on every keep-alive; past it the command host kills the group (a frozen
   * worker). Without it the command is guarded only against its worker's death.
   */
  guardUntil?: () => number;
  /** Hands the caller the keep-alive to call on every heartbeat that renewed the lease. */
  keepAlive?: (ping: () => void) => void;
  /** The worker's API for this attempt (steps, values, LLM proxy): variables and the CLI's directory. */
  runApi?: { env: Record<string, string>; binDir: string };
}

export type ExecutionOutcome = 'success' | 'transient' | 'failed' | 'aborted';

export interface ExecutionResult {
  outcome: ExecutionOutcome;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  outputTail: string;
  durationMs: number;
  pid?: number;
  /** Set when the command could not be started at all (the attempt fails at once, with this reason). */
  startError?: string;
}

/** EX_TEMPFAIL: the command asks to be retried later. */
export const EXIT_TRANSIENT = 75;
export const OUTPUT_TAIL_BYTES = 64 * 1024;

export interface RunExecutor {
  readonly kind: string;
  /** Whether the command it runs can call back into the worker (then each attempt gets a credential). */
  readonly usesRunApi: boolean;
  /** Runs one attempt; `signal` aborts it at once (lock lost, cancelled, shutting down). */
  execute(req: ExecutionRequest, signal: AbortSignal): Promise<ExecutionResult>;
}

export const RUN_EXECUTOR = Symbol('RUN_EXECUTOR');

export function classifyExit(
  exitCode: number | null,
  signal: string | null,
  timedOut: boolean,
  aborted: boolean,
): ExecutionOutcome {
  // An exit status means the command ended on its own — even if its lease was lost or its timeout
  // fired meanwhile (under load the exit can reach us after the abort). Its work is done: report
  // what it said, and let the fenced finalize decide whether the outcome is still ours to record.
  // Calling it "aborted" would hand a finished run to another attempt: the effect twice (chaos
  // "slack", seed 72132249).
  if (exitCode === 0) return 'success';
  if (exitCode === EXIT_TRANSIENT) return 'transient';
  if (exitCode !== null) return 'failed';
  if (aborted) return 'aborted'; // killed by us because the lease was lost, cancelled or shutting down
  if (timedOut) return 'transient';
  // SIGKILL we did not send: the command host (no keep-alive from a stalled worker) or the OOM killer.
  // Neither says the work is impossible: another attempt may succeed.
  if (signal === 'SIGKILL') return 'transient';
  return 'failed'; // another signal, or a command that could not start
}
