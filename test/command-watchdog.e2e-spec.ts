import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommandWatchdog } from '../src/runs/executor/command-watchdog';
import { WATCHDOG_MARKER } from '../src/runs/executor/watchdog-program';
import {
  closeDb,
  count,
  createProject,
  createRun,
  executions,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  WorkerProcess,
} from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';

/** `pid (comm) state ppid pgrp …` of every live (not zombie) process, read from /proc. */
function processes(): Array<{ pid: number; ppid: number; pgid: number; uid: number; cmdline: string }> {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      if (state === 'Z') continue;
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${name}/status`, 'utf8'))?.[1]);
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      out.push({ pid: Number(name), ppid: Number(ppid), pgid: Number(pgid), uid, cmdline });
    } catch {
      /* exited while we looked */
    }
  }
  return out;
}

const group = (pgid: number) => processes().filter((p) => p.pgid === pgid);
const watchdogsOf = (worker: number) =>
  processes().filter((p) => p.ppid === worker && p.cmdline.endsWith(`\0${WATCHDOG_MARKER}\0`));

/**
 * The worker's one watchdog process, seen from outside (/proc): commands die with a killed worker,
 * before the lock of a frozen one lapses, and still when the watchdog itself was killed. Commands
 * run as RUN_AS_USER (nobody: tests run as root) while the watchdog runs as the worker's user.
 */
describe('command watchdog', () => {
  const countFile = join(tempDir('wd'), 'executions.log');
  let env: Record<string, string>;
  let api: TestApp;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    env = testEnv('watchdog', countFile, { REDIS_PREFIX: uniquePrefix('watchdog'), WORKER_CONCURRENCY: '8' });
    api = await startApp({ ...env, APP_ROLE: 'api' });
  });
  afterEach(async () => {
    worker?.child.kill('SIGCONT');
    await worker?.stop('SIGKILL');
    worker = undefined;
  });
  afterAll(async () => {
    await api.close();
    await closeDb();
  });

  // Runs of an earlier test come back to the next worker (their lease lapsed): room for them too.
  /** Starts runs that sleep `secs` each and returns their commands' process groups once all started. */
  async function startRuns(n: number, secs: number): Promise<number[]> {
    const project = await createProject(api.http, { maxConcurrentRuns: n });
    const runs = await Promise.all(
      Array.from({ length: n }, () => createRun(api.http, project.id, `sleep=${secs}`, true)),
    );
    await waitFor(() => runs.every((r) => count(countFile, 'start', r.id) === 1), 15_000, 'the commands to start');
    const pgids = runs.map((r) => {
      const pid = executions(countFile).find((e) => e.runId === r.id && e.kind === 'start')!.pid;
      return processes().find((p) => p.pid === pid)!.pgid;
    });
    for (const pgid of pgids) expect(group(pgid).length).toBeGreaterThan(0);
    return pgids;
  }

  it('one watchdog for all of a worker’s commands; kill -9 of the worker kills every command group at once', async () => {
    worker = await startProcess(env);
    const pgids = await startRuns(3, 8);
    const pid = worker.child.pid!;
    expect(watchdogsOf(pid)).toHaveLength(1);
    expect(watchdogsOf(pid)[0].uid).toBe(process.getuid!());
    // It needs no environment, and the worker's holds onceflow's credentials.
    expect(env.API_KEYS).toBeTruthy();
    expect(readFileSync(`/proc/${watchdogsOf(pid)[0].pid}/environ`, 'utf8')).toBe('');
    // Each command runs as RUN_AS_USER and is the worker's own child: no wrapper process per run.
    for (const pgid of pgids) {
      const leader = processes().find((p) => p.pid === pgid)!;
      expect(leader.ppid).toBe(pid);
      expect(leader.uid).not.toBe(process.getuid!());
    }
    worker.child.kill('SIGKILL');
    await waitFor(() => pgids.every((g) => group(g).length === 0), 2000, 'every command group to be gone');
  });

  it('a frozen worker’s commands die within the watchdog deadline (0.8 × the lock TTL), before its lock lapses', async () => {
    worker = await startProcess(env);
    const pgids = await startRuns(2, 9);
    const frozenAt = Date.now();
    worker.child.kill('SIGSTOP');
    await waitFor(() => pgids.every((g) => group(g).length === 0), 5000, 'the frozen worker’s commands to die');
    // RUN_LOCK_TTL_MS is 1500: the deadline is 1200 ms after the last renewal (a beat every 500 ms).
    expect(Date.now() - frozenAt).toBeLessThan(1500 + 300);
  });

  it('a killed watchdog is started again and still guards the commands that were running', async () => {
    worker = await startProcess(env);
    const pgids = await startRuns(2, 9);
    const pid = worker.child.pid!;
    const [first] = watchdogsOf(pid);
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => watchdogsOf(pid).some((w) => w.pid !== first.pid), 3000, 'a new watchdog');
    expect(watchdogsOf(pid)).toHaveLength(1);
    // The commands kept running; the new watchdog knows them: a freeze now still kills them.
    for (const g of pgids) expect(group(g).length).toBeGreaterThan(0);
    worker.child.kill('SIGSTOP');
    await waitFor(() => pgids.every((g) => group(g).length === 0), 5000, 'the commands to die under the new watchdog');
  });
});

/**
 * The deadline the worker writes is an instant, not a duration: a watchdog that reads it late (still
 * booting, short of CPU on a busy machine) kills the group at that instant, not that long after it.
 */
describe('CommandWatchdog: deadlines are instants of a clock the worker and the watchdog share', () => {
  const sleeper = () => spawn('sleep', ['30'], { detached: true, stdio: 'ignore' }).pid!;
  let watchdog: CommandWatchdog;
  const groups: number[] = [];
  afterEach(() => {
    if (watchdog.pid) process.kill(watchdog.pid, 'SIGCONT');
    watchdog.stop();
    for (const g of groups.splice(0)) {
      try {
        process.kill(-g, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });

  it('a deadline read after it passed kills at once', async () => {
    watchdog = new CommandWatchdog().start();
    // Up and reading: a first group with a short deadline dies.
    const first = sleeper();
    groups.push(first);
    await watchdog.watch(first, Date.now() + 100);
    await waitFor(() => group(first).length === 0, 5000, 'the first group to die');

    const late = sleeper();
    groups.push(late);
    process.kill(watchdog.pid!, 'SIGSTOP');
    await watchdog.watch(late, Date.now() + 600);
    await sleep(1500);
    expect(group(late).length).toBeGreaterThan(0);
    const resumed = Date.now();
    process.kill(watchdog.pid!, 'SIGCONT');
    await waitFor(() => group(late).length === 0, 3000, 'the late group to die');
    // Read as a duration, the line would have killed it 600 ms after the watchdog resumed; the
    // bound leaves room for a busy machine to schedule the resumed watchdog and the 50-ms polls.
    expect(Date.now() - resumed).toBeLessThan(450);
  });
});
