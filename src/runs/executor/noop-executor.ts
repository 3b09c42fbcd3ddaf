import { ExecutionRequest, ExecutionResult, RunExecutor } from './executor';

/**
 * In-process executor that does nothing and succeeds: for benchmarks (RUN_EXECUTOR=noop), so the
 * fork/exec cost of /bin/sh does not hide the cost of the guarantees themselves.
 */
export class NoopExecutor implements RunExecutor {
  readonly kind = 'noop';
  readonly usesRunApi = false;

  async execute(_req: ExecutionRequest, signal: AbortSignal): Promise<ExecutionResult> {
    const aborted = signal.aborted;
    return {
      outcome: aborted ? 'aborted' : 'success',
      exitCode: aborted ? null : 0,
      signal: null,
      timedOut: false,
      outputTail: '',
      durationMs: 0,
    };
  }
}
