/**
 * The shell executor alone: what one attempt of a forked `true` costs the worker's side of it —
 * the workspace check, the attempt directory and requirement file, the host's messages, the exit —
 * with no queue, lock or database. ShellExecutor runs 32 attempts at a time in this process (as the
 * full path's worker does, RUN_AS_USER=same) against a scratch WORKSPACE_ROOT; this process's CPU
 * (its libuv thread pool and the kernel's time for its file-system calls included) is the
 * executor's, the host's is read apart from /proc. Not part of `npm run bench`; for A/B of
 * executor changes (docs/benchmarks.md):
 *
 *   npx nest build && node dist/bench/executor-alone.js [attempts, default 2000]
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveRunIdentity } from '../src/runs/executor/run-identity';
import { ShellExecutor } from '../src/runs/executor/shell-executor';
import { cpuMs, pool } from './support';

const IN_FLIGHT = 32;
const WARMUP = 300;

async function main(): Promise<void> {
  const attempts = Number(process.argv[2] ?? 2000);
  const root = mkdtempSync(join(tmpdir(), 'onceflow-executor-bench-'));
  const workspace = join(root, 'project');
  mkdirSync(workspace);
  const executor = new ShellExecutor('true', { PATH: '/usr/bin:/bin' }, resolveRunIdentity('same'), root);
  executor.host.start();
  // The host's pipes do not hold the event loop open: this does, while attempts are out.
  const alive = setInterval(() => undefined, 1000);
  let n = 0;
  const attempt = async () => {
    const id = ++n;
    const r = await executor.execute(
      {
        runId: `run-${id}`,
        attempt: 1,
        fencingToken: '1',
        requirement: `bench run ${id}\nno-op`,
        projectId: 'p',
        projectName: 'p',
        projectWorkspace: workspace,
        taskId: null,
        workspace,
        idempotencyKey: `k-${id}`,
        timeoutMs: 60_000,
      },
      new AbortController().signal,
    );
    if (r.outcome !== 'success') throw new Error(`attempt ${id}: ${r.outcome} ${r.outputTail}`);
  };
  try {
    await pool(WARMUP, IN_FLIGHT, attempt);
    const own0 = process.cpuUsage();
    const host0 = cpuMs(executor.host.pid);
    const t0 = Date.now();
    await pool(attempts, IN_FLIGHT, attempt);
    const seconds = (Date.now() - t0) / 1000;
    const own = process.cpuUsage(own0);
    const host1 = cpuMs(executor.host.pid);
    const hostUs = host0 === null || host1 === null ? null : ((host1 - host0) * 1000) / attempts;
    process.stdout.write(
      `${attempts} attempts of \`true\`, ${IN_FLIGHT} in flight: ${(attempts / seconds).toFixed(0)} attempts/s; ` +
        `CPU per attempt: executor ${((own.user + own.system) / attempts).toFixed(0)} µs, ` +
        `host ${hostUs === null ? '—' : hostUs.toFixed(0)} µs (the kernel's forks in it; not the commands' own)\n`,
    );
  } finally {
    clearInterval(alive);
    await executor.onApplicationShutdown();
    rmSync(root, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(1);
  },
);
