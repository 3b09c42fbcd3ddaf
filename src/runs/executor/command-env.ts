/** What a run's command may see of the worker's environment (contract: "What the command can see"). */
const ALLOWED = new Set(['PATH', 'HOME', 'LANG', 'TZ', 'TMPDIR']);

/**
 * An allow-list, not a deny-list: the worker's environment holds onceflow's credentials and
 * whatever else an operator started it with (cloud keys, PG* variables); a command — an AI agent
 * fed with text from work items — gets only the locale, time zone, paths, and what the operator
 * named in ORCHESTRATOR_ENV_PASSTHROUGH.
 */
export function commandBaseEnv(workerEnv: NodeJS.ProcessEnv, passthrough: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  const extra = new Set(passthrough);
  for (const [name, value] of Object.entries(workerEnv)) {
    if (value === undefined) continue;
    if (ALLOWED.has(name) || name.startsWith('LC_') || extra.has(name)) out[name] = value;
  }
  return out;
}
