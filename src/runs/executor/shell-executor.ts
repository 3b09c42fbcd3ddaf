import { chown, mkdtemp, rm, rmdir, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandHost, killGroup } from './command-host';
import { commandBaseEnv } from './command-env';
import { classifyExit, ExecutionRequest, ExecutionResult, OUTPUT_TAIL_BYTES, RunExecutor } from './executor';
import { OutputTail } from './output-tail';
import type { RunIdentity } from './run-identity';
import { ensureWorkspace } from './workspace-guard';

/**
 * The command runs in its own process group (its pgid is its pid), forked and guarded by the
 * worker's one command host (command-host.ts): killed when the worker dies (kill -9, OOM) or stops
 * sending keep-alives past `guardUntil` (a fifth of the lock TTL before the lock lapses: the worker
 * is frozen), so an attempt cannot finish behind the next attempt's back. The host guards the group
 * from the moment it forks it, and the command is behind a gate: the shell first waits for one line
 * on stdin, which the host writes only once the group's pid is in the worker's pipe. A host that
 * dies before that closes the gate's pipe, and the shell exits without running anything; one that
 * dies after it leaves the worker a pid to kill; a worker that dies makes the host kill every group
 * at the EOF. The same shell then runs the command, as `sh -c` would: $0 is /bin/sh, no positional
 * parameters, no variable of the gate's left (an exec of a second shell cost ~0.7 ms of CPU per
 * run). The configured command is passed as $1 and the run's data only as environment variables:
 * a requirement is never shell code.
 */
export const GATE = `IFS= read -r go && [ "$go" = go ] || exit 125
exec </dev/null
unset go
eval "shift; $1"`;

/** The host's deadline for a command nobody sends keep-alives for: a year. */
const UNGUARDED_MS = 365 * 24 * 3600 * 1000;

/** RUN_REQUIREMENT is set only up to this size (Linux caps one variable at 128 KiB; the file always has it). */
export const REQUIREMENT_ENV_MAX_BYTES = 64 * 1024;

interface Prepared {
  env: NodeJS.ProcessEnv;
  /** The attempt's private directory (requirement file; HOME when the command runs as another user). */
  dir: string;
  requirementFile: string;
}

/**
 * The attempt's directory goes with the attempt. Usually it holds the requirement file and nothing
 * else: an unlink and an rmdir, where a recursive rm walks it (lstat, readdir, lstat, unlink, rmdir)
 * through the thread pool on every run. Anything else there (the command's files in its HOME, the
 * file removed by the command, or never written) takes the walk.
 */
async function removeAttemptDir(dir: string, requirementFile: string): Promise<void> {
  try {
    await unlink(requirementFile);
    await rmdir(dir);
  } catch {
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

export class ShellExecutor implements RunExecutor {
  readonly kind = 'shell';
  readonly usesRunApi = true;
  /** One per worker process: the executor is a singleton of the worker's module. */
  readonly host = new CommandHost(OUTPUT_TAIL_BYTES);

  /** What every command sees of the worker's environment: filtered once, not per run. */
  private readonly baseEnv: Readonly<Record<string, string>>;

  constructor(
    private readonly command: string,
    workerEnv: NodeJS.ProcessEnv,
    private readonly identity: RunIdentity,
    private readonly workspaceRoot: string,
    passthrough: readonly string[] = [],
  ) {
    this.baseEnv = commandBaseEnv(workerEnv, passthrough);
  }

  /** The worker is going down, its commands already handed over: the host goes with it. */
  onApplicationShutdown(): void {
    this.host.stop();
  }

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
      await removeAttemptDir(prepared.dir, prepared.requirementFile);
    }
  }

  /** The workspace (owned by the run's user), the requirement file, and the command's environment. */
  private async prepare(req: ExecutionRequest): Promise<Prepared> {
    const owner = this.identity.kind === 'user' ? this.identity : undefined;
    await ensureWorkspace(this.workspaceRoot, req.workspace, owner, { likelyExists: true });
    const dir = await mkdtemp(join(tmpdir(), 'onceflow-attempt-'));
    const requirementFile = join(dir, 'requirement.txt');
    try {
      await writeFile(requirementFile, req.requirement, { mode: 0o600 });
      if (owner) for (const path of [dir, requirementFile]) await chown(path, owner.uid, owner.gid);
    } catch (err) {
      // A full disk must not also leave a directory behind per failed attempt.
      await removeAttemptDir(dir, requirementFile);
      throw err;
    }
    const env: NodeJS.ProcessEnv = { ...this.baseEnv };
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
    return { env, dir, requirementFile };
  }

  private async run(
    req: ExecutionRequest,
    signal: AbortSignal,
    prepared: Prepared,
    started: number,
  ): Promise<ExecutionResult> {
    // The lease was lost while the attempt was being prepared: nothing is forked.
    if (signal.aborted) return { ...killed(started, ''), outcome: 'aborted' };
    const tail = new OutputTail(OUTPUT_TAIL_BYTES);
    const guardUntil = req.guardUntil ?? (() => Date.now() + UNGUARDED_MS);
    const child = this.host.spawn({
      file: '/bin/sh',
      args: ['-c', GATE, '/bin/sh', this.command],
      cwd: req.workspace,
      env: prepared.env,
      until: guardUntil(),
      ...(this.identity.kind === 'user' ? { uid: this.identity.uid, gid: this.identity.gid } : {}),
    });
    const output = async () => {
      tail.push(await child.output);
      return tail.toString();
    };
    const pgid = await child.pid;
    if (pgid === undefined) {
      const { startError } = await child.exited;
      // E2BIG (a variable over the kernel's limit), EPERM, ENOENT, …: no process exists.
      if (startError !== undefined) return notStarted(started, startError, await output());
      // Its host died before the command passed its gate: nothing ran; another attempt may.
      return { ...killed(started, await output()), outcome: classifyExit(null, 'SIGKILL', false, signal.aborted) };
    }
    let timedOut = false;
    let aborted = false;
    const stop = () => {
      killGroup(pgid);
      // Not ours to signal (another user, no CAP_KILL): the host does it.
      this.host.release(pgid);
    };
    const onAbort = () => {
      aborted = true;
      stop();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    // Each renewed heartbeat moves the group's deadline: a worker that stops renewing loses its command.
    req.keepAlive?.(() => this.host.keepAlive(pgid, guardUntil()));
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, req.timeoutMs);

    const { code, sig, startError } = await child.exited;
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    // Anything the command left behind in its group dies with the attempt (its output closes then).
    this.host.release(pgid);
    const outputTail = await output();
    if (startError !== undefined) return notStarted(started, startError, outputTail);
    return {
      outcome: classifyExit(code, sig, timedOut, aborted),
      exitCode: code,
      signal: sig,
      timedOut,
      outputTail,
      durationMs: Date.now() - started,
      pid: pgid,
    };
  }
}

function killed(started: number, outputTail: string): ExecutionResult {
  return {
    outcome: 'transient',
    exitCode: null,
    signal: 'SIGKILL',
    timedOut: false,
    outputTail,
    durationMs: Date.now() - started,
  };
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
