// What the worker's API and the `onceflow` CLI agree on. Imports nothing: the CLI loads this
// file in every step call and must start fast.

/** Step and value names (contract: 1–128 characters of [A-Za-z0-9._:-]). */
export const STEP_NAME_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
/** Largest recorded step output and stored value (contract: 1 MiB). */
export const MAX_RECORDED_BYTES = 1024 * 1024;
/** POST /v1/steps/:name/finish: the step command's exit code. */
export const EXIT_CODE_HEADER = 'onceflow-exit-code';
/** POST /v1/steps/:name/start answers `done` (body = recorded stdout) or `run`. */
export const STEP_STATE_HEADER = 'onceflow-step';

/** The CLI's exit codes besides the step command's own (contract: "Steps and the LLM cache"). */
export const EXIT = {
  ok: 0,
  /** `onceflow get KEY`: nothing stored under KEY. */
  missing: 1,
  usage: 2,
  /** The attempt no longer holds the run: nothing was run or recorded. */
  fenced: 3,
  /** The worker cannot be reached: the attempt is retried like any transient failure. */
  unreachable: 75,
} as const;
