import { ChildProcess, spawn } from 'node:child_process';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandBaseEnv } from './command-env';
import { classifyExit, ExecutionRequest, ExecutionResult, OUTPUT_TAIL_BYTES, RunExecutor } from './executor';
import { OutputTail } from './output-tail';
import type { RunIdentity } from './run-identity';
import { ensureWorkspace } from './workspace-guard';

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

/** RUN_REQUIREMENT is set only up to this size (Linux caps one variable at 128 KiB; the file always has it). */
export const REQUIREMENT_ENV_MAX_BYTES = 64 * 1024;

interface Prepared {
  env: NodeJS.ProcessEnv;
  /** The attempt's private directory (requirement file; HOME when the command runs as another user). */
  dir: string;
}

export class ShellExecutor implements RunExecutor {
  readonly kind = 'shell';
  readonly usesRunApi = true;

  constructor(
    private readonly command: string,
    private readonly workerEnv: NodeJS.ProcessEnv,
    private readonly identity: RunIdentity,
    private readonly workspaceRoot: string,
    private readonly passthrough: readonly string[] = [],
  ) {}

  async execute(req: ExecutionRequest, signal: AbortSignal): Promise<ExecutionResult> {
    const started = Date.now();
    let prepared: Prepared;
    try {
      prepared = await this.prepare(req);
    } catch (err) {
      return notStarted(started, `could not prepare its workspace: ${(err as Error).message}`);
    }
    try {
      return await this.run(req, signal, prepared, started);
    } finally {
      await rm(prepared.dir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** The workspace (owned by the run's user), the requirement file, and the command's environment. */
  private async prepare(req: ExecutionRequest): Promise<Prepared> {
    const owner = this.identity.kind === 'user' ? this.identity : undefined;
    await ensureWorkspace(this.workspaceRoot, req.workspace, owner);
    const dir = await mkdtemp(join(tmpdir(), 'onceflow-attempt-'));
    const requirementFile = join(dir, 'requirement.txt');
    await writeFile(requirementFile, req.requirement, { mode: 0o600 });
    if (owner) for (const path of [dir, requirementFile]) await chown(path, owner.uid, owner.gid);
    const env: NodeJS.ProcessEnv = commandBaseEnv(this.workerEnv, this.passthrough);
    // The worker's HOME is no place for another user's files (and may hold the worker's own).
    if (this.identity.kind === 'user') env.HOME = dir;
    Object.assign(env, {
      RUN_ID: req.runId,
      RUN_ATTEMPT: String(req.attempt),
      RUN_FENCING_TOKEN: req.fencingToken,
      RUN_REQUIREMENT_FILE: requirementFile,
      PROJECT_ID: req.projectId,
      PROJECT_NAME: req.projectName,
      PROJECT_WORKSPACE: req.projectWorkspace,
      TASK_ID: req.taskId ?? '',
      IDEMPOTENCY_KEY: req.idempotencyKey,
      ...req.runApi?.env,
    });
    if (Buffer.byteLength(req.requirement) <= REQUIREMENT_ENV_MAX_BYTES) env.RUN_REQUIREMENT = req.requirement;
    if (req.runApi) env.PATH = env.PATH ? `${req.runApi.binDir}:${env.PATH}` : req.runApi.binDir;
    return { env, dir };
  }

  private async run(
    req: ExecutionRequest,
    signal: AbortSignal,
    prepared: Prepared,
    started: number,
  ): Promise<ExecutionResult> {
    const tail = new OutputTail(OUTPUT_TAIL_BYTES);
    const watchdogSecs = ((req.watchdogMs ?? 365 * 24 * 3600 * 1000) / 1000).toFixed(3);
    let child: ChildProcess;
    try {
      child = spawn('/bin/sh', ['-c', WRAPPER, 'onceflow-run', this.command, watchdogSecs], {
        cwd: req.workspace,
        env: prepared.env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        ...(this.identity.kind === 'user' ? { uid: this.identity.uid, gid: this.identity.gid } : {}),
      });
    } catch (err) {
      // E2BIG (a variable over the kernel's limit), EPERM, …: thrown before any process exists.
      return notStarted(started, (err as Error).message);
    }
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
          /* already gone — or not ours to signal: closing the lifeline makes the watchdog do it */
        }
      }
      lifeline?.destroy();
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

    let startError: string | undefined;
    const { code, sig } = await new Promise<{ code: number | null; sig: string | null }>((resolve) => {
      child.once('error', (err) => {
        startError = err.message;
        resolve({ code: null, sig: null });
      });
      child.once('exit', (c, s) => resolve({ code: c, sig: s }));
    });
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    // Closing our end of the lifeline makes the watchdog clean up anything the command left behind.
    lifeline?.destroy();
    await waitForClose(child, 1000);
    if (startError !== undefined) return notStarted(started, startError, tail.toString());
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

/** A command that could not be started fails its attempt at once, with the reason. */
function notStarted(started: number, reason: string, output = ''): ExecutionResult {
  return {
    outcome: 'failed',
    exitCode: null,
    signal: null,
    timedOut: false,
    outputTail: `${output}[onceflow] could not start the command: ${reason}\n`,
    durationMs: Date.now() - started,
    startError: reason,
  };
}

function waitForClose(child: ChildProcess, ms: number): Promise<void> {
  if (child.stdout?.destroyed && child.stderr?.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    child.once('close', () => {
      clearTimeout(t);
      resolve();
    });
  });
}
