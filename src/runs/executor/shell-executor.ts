import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { Socket } from 'node:net';
import { classifyExit, ExecutionRequest, ExecutionResult, OUTPUT_TAIL_BYTES, RunExecutor } from './executor';
import { OutputTail } from './output-tail';

/**
 * The command runs in its own process group next to a tiny watchdog that reads fd 3, a socket only
 * this worker holds the other end of. When the worker dies (kill -9, OOM) the kernel closes that
 * end, the watchdog reads EOF and kills the whole group: the attempt cannot finish behind the next
 * attempt's back. The worker also writes a keep-alive byte on every heartbeat that renewed the run
 * lock; when none comes for `watchdogMs` (0.8 × the lock TTL: the worker is frozen — SIGSTOP, a
 * stalled VM — and its lock is about to lapse) the watchdog kills the group before another worker
 * can start the run. (dash forks the last command of `sh -c`, so a parent-death
 * signal on the shell alone would not reach the command.) The configured command is passed as $1
 * and the run's data only as environment variables: a requirement is never shell code.
 */
const WRAPPER = `(while b=$(timeout --foreground "$2" head -c 1 <&3 2>/dev/null) && [ -n "$b" ]; do :; done; kill -KILL 0) </dev/null >/dev/null 2>&1 &
exec 3<&-
exec /bin/sh -c "$1"`;

/** onceflow's own credentials are not the orchestrator's business. */
const WITHHELD = ['API_KEYS', 'ADMIN_PASSWORD', 'PLANE_WEBHOOK_SECRETS', 'SLACK_WEBHOOK_URL', 'DATABASE_URL', 'REDIS_URL'];

export class ShellExecutor implements RunExecutor {
  readonly kind = 'shell';
  readonly usesRunApi = true;

  constructor(
    private readonly command: string,
    private readonly baseEnv: NodeJS.ProcessEnv,
  ) {}

  async execute(req: ExecutionRequest, signal: AbortSignal): Promise<ExecutionResult> {
    const started = Date.now();
    await mkdir(req.workspace, { recursive: true });
    const env: NodeJS.ProcessEnv = { ...this.baseEnv };
    for (const name of WITHHELD) delete env[name];
    Object.assign(env, {
      RUN_ID: req.runId,
      RUN_ATTEMPT: String(req.attempt),
      RUN_FENCING_TOKEN: req.fencingToken,
      RUN_REQUIREMENT: req.requirement,
      PROJECT_ID: req.projectId,
      PROJECT_NAME: req.projectName,
      PROJECT_WORKSPACE: req.projectWorkspace,
      TASK_ID: req.taskId ?? '',
      IDEMPOTENCY_KEY: req.idempotencyKey,
      ...req.runApi?.env,
    });
    if (req.runApi) env.PATH = env.PATH ? `${req.runApi.binDir}:${env.PATH}` : req.runApi.binDir;
    const tail = new OutputTail(OUTPUT_TAIL_BYTES);
    const watchdogSecs = ((req.watchdogMs ?? 365 * 24 * 3600 * 1000) / 1000).toFixed(3);
    const child = spawn('/bin/sh', ['-c', WRAPPER, 'onceflow-run', this.command, watchdogSecs], {
      cwd: req.workspace,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    const lifeline = child.stdio[3] as Socket | null;
    // A keep-alive written after the watchdog died (it killed the group) fails with EPIPE or
    // ECONNRESET. Harmless: the command's exit decides the outcome; unhandled, it would crash the worker.
    lifeline?.on('error', () => undefined);
    // Each byte on the lifeline is a keep-alive: a worker that stops sending (frozen) loses its command.
    const ping = () => {
      if (lifeline && !lifeline.destroyed) lifeline.write('k');
    };
    ping();
    req.keepAlive?.(ping);
    child.stdout?.on('data', (c: Buffer) => tail.push(c));
    child.stderr?.on('data', (c: Buffer) => tail.push(c));

    let timedOut = false;
    let aborted = signal.aborted;
    const killGroup = () => {
      if (child.pid) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    };
    const onAbort = () => {
      aborted = true;
      killGroup();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    if (aborted) killGroup();
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, req.timeoutMs);

    const { code, sig } = await new Promise<{ code: number | null; sig: string | null }>((resolve) => {
      child.once('error', (err) => {
        tail.push(Buffer.from(`\n[onceflow] could not start the command: ${err.message}\n`));
        resolve({ code: null, sig: null });
      });
      child.once('exit', (c, s) => resolve({ code: c, sig: s }));
    });
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    // Closing our end of the lifeline makes the watchdog clean up anything the command left behind.
    lifeline?.destroy();
    await waitForClose(child, 1000);
    return {
      outcome: classifyExit(code, sig, timedOut, aborted),
      exitCode: code,
      signal: sig,
      timedOut,
      outputTail: tail.toString(),
      durationMs: Date.now() - started,
      pid: child.pid,
    };
  }
}

function waitForClose(child: ReturnType<typeof spawn>, ms: number): Promise<void> {
  if (child.stdout?.destroyed && child.stderr?.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    child.once('close', () => {
      clearTimeout(t);
      resolve();
    });
  });
}
