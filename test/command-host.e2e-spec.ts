import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CommandHost } from '../src/runs/executor/command-host';
import { COMMAND_HOST_MARKER } from '../src/runs/executor/command-host-program';
import { GATE } from '../src/runs/executor/shell-executor';
import {
  closeDb,
  count,
  createProject,
  createRun,
  executions,
  isAlive,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  waitForStatus,
  WorkerProcess,
} from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';

interface Proc {
  pid: number;
  ppid: number;
  pgid: number;
  uid: number;
  comm: string;
  cmdline: string;
}

/** `pid (comm) state ppid pgrp …` of every live (not zombie) process, read from /proc. */
function processes(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      if (state === 'Z') continue;
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${name}/status`, 'utf8'))?.[1]);
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      out.push({ pid: Number(name), ppid: Number(ppid), pgid: Number(pgid), uid, comm, cmdline });
    } catch {
      /* exited while we looked */
    }
  }
  return out;
}

const group = (pgid: number) => processes().filter((p) => p.pgid === pgid);
const hostsOf = (worker: number) => processes().filter((p) => p.ppid === worker && p.comm === COMMAND_HOST_MARKER);

/** Gone, or a zombie waiting for a parent that no longer reads it. */
function dead(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].startsWith('Z');
  } catch {
    return true;
  }
}

/** The host that forks and guards a worker's commands, driven directly against real processes. */
describe('CommandHost', () => {
  const host = new CommandHost(64).start();
  afterAll(() => host.stop());
  const request = (script: string, extra: Partial<Parameters<CommandHost['spawn']>[0]> = {}) => ({
    file: '/bin/sh',
    args: ['-c', script],
    cwd: tmpdir(),
    env: { PATH: '/usr/bin:/bin' },
    until: Date.now() + 60_000,
    ...extra,
  });

  it('forks the command, opens its gate once it announced it, and reports its exit and the tail of what it wrote', async () => {
    const child = host.spawn(request('read -r go; echo "got $go"; sleep 0.2; echo oops >&2; exit 3'));
    const pid = await child.pid;
    expect(pid).toEqual(expect.any(Number));
    // Its own process group, a child of the host (not of this process).
    const leader = processes().find((p) => p.pid === pid)!;
    expect(leader.pgid).toBe(pid);
    expect(leader.ppid).toBe(host.pid);
    expect(await child.exited).toEqual({ code: 3, sig: null });
    expect((await child.output).toString()).toMatch(/^(got go\noops\n|oops\ngot go\n)$/);
  });

  it('keeps only the last bytes of a long output, also when they come in one large read', async () => {
    const lines = host.spawn(request('read -r go; i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done'));
    expect(await lines.exited).toEqual({ code: 0, sig: null });
    const out = (await lines.output).toString();
    expect(out.endsWith('line1999\n')).toBe(true);
    expect(out.length).toBeLessThanOrEqual(64);
    // 6,000 bytes in one write: one read takes them all, so the cut is inside a chunk.
    const big = host.spawn(request('read -r go; printf "%06000d" 0; echo end'));
    expect(await big.exited).toEqual({ code: 0, sig: null });
    const bigOut = (await big.output).toString();
    expect(bigOut.length).toBe(64);
    expect(bigOut.endsWith('0end\n')).toBe(true);
  });

  it('reports a command that could not start, with the reason', async () => {
    const child = host.spawn(request('true', { cwd: join(tmpdir(), 'no-such-dir-of-onceflow') }));
    expect(await child.pid).toBeUndefined();
    expect(await child.exited).toMatchObject({ code: null, startError: expect.stringMatching(/ENOENT/) });
    const big = host.spawn(request('true', { env: { HUGE: 'x'.repeat(200 * 1024) } }));
    expect(await big.exited).toMatchObject({ code: null, startError: expect.stringMatching(/E2BIG/) });
  });

  it('kills a group at its deadline unless kept alive, and on release', async () => {
    const starved = host.spawn(request('read -r go; exec sleep 30', { until: Date.now() + 300 }));
    const starvedPid = (await starved.pid)!;
    const fed = host.spawn(request('read -r go; exec sleep 30', { until: Date.now() + 300 }));
    const fedPid = (await fed.pid)!;
    const ping = setInterval(() => host.keepAlive(fedPid, Date.now() + 300), 100);
    try {
      expect(await starved.exited).toEqual({ code: null, sig: 'SIGKILL' });
      await sleep(500);
      expect(isAlive(fedPid)).toBe(true);
    } finally {
      clearInterval(ping);
    }
    host.release(fedPid);
    expect(await fed.exited).toEqual({ code: null, sig: 'SIGKILL' });
    expect(dead(starvedPid)).toBe(true);
  });

  it('a deadline the host reads after it passed kills at once (deadlines are instants, not durations)', async () => {
    const child = host.spawn(request('read -r go; exec sleep 30'));
    const pid = (await child.pid)!;
    process.kill(host.pid!, 'SIGSTOP');
    try {
      host.keepAlive(pid, Date.now() + 600);
      await sleep(1500);
      expect(isAlive(pid)).toBe(true);
    } finally {
      process.kill(host.pid!, 'SIGCONT');
    }
    const resumed = Date.now();
    await waitFor(() => dead(pid), 3000, 'the group to die');
    // Read as a duration, the line would have killed it 600 ms after the host resumed; the bound
    // leaves room for a busy machine to schedule the resumed host and the 50-ms polls.
    expect(Date.now() - resumed).toBeLessThan(450);
  });

  it('a host that died: its running command is killed and reported killed, the next spawn gets a new host', async () => {
    const dying = new CommandHost(64).start();
    const running = dying.spawn(request('read -r go; exec sleep 30'));
    const runningPid = (await running.pid)!;
    await sleep(100);
    expect(isAlive(runningPid)).toBe(true);
    const first = dying.pid!;
    process.kill(first, 'SIGKILL');
    expect(await running.exited).toEqual({ code: null, sig: 'SIGKILL' });
    expect((await running.output).toString()).toMatch(/process that forked the command died/);
    await waitFor(() => dead(runningPid), 2000, 'the command to be dead');
    const next = dying.spawn(request('read -r go; exit 0'));
    await next.pid;
    expect(dying.pid).not.toBe(first);
    expect(await next.exited).toEqual({ code: 0, sig: null });
    expect(dying.starts).toBe(2);
    dying.stop();
  });

  it('the gate: a command whose host died before announcing it reads EOF and never runs', () => {
    const marker = join(tempDir('host-gate'), 'ran');
    const closed = spawnSync('/bin/sh', ['-c', GATE, '/bin/sh', `touch '${marker}'`], { input: '' });
    expect(closed.status).toBe(125);
    expect(existsSync(marker)).toBe(false);
    const opened = spawnSync('/bin/sh', ['-c', GATE, '/bin/sh', `touch '${marker}'`], { input: 'go\n' });
    expect(opened.status).toBe(0);
    expect(existsSync(marker)).toBe(true);
  });

  it('the gate runs the command as `sh -c` would: $0, no positional parameters, nothing of the gate left, stdin empty', () => {
    const command = 'echo "$0 $# [$*] go=${go-unset}"; f() { echo "f$1"; }; f x; cat; exit 7';
    const gated = spawnSync('/bin/sh', ['-c', GATE, '/bin/sh', command], { input: 'go\nleft for the command?\n' });
    const plain = spawnSync('/bin/sh', ['-c', command], { input: '' });
    expect(gated.status).toBe(7);
    expect(String(gated.stdout)).toBe('/bin/sh 0 [] go=unset\nfx\n');
    expect([gated.status, String(gated.stdout)]).toEqual([plain.status, String(plain.stdout)]);
  });
});

/**
 * The worker's one command host, seen from outside (/proc): commands die with a killed worker,
 * before the lock of a frozen one lapses, and with a killed host. Commands run as RUN_AS_USER
 * (nobody: tests run as root) while the host runs as the worker's user.
 */
describe('command host of a worker process', () => {
  const countFile = join(tempDir('host'), 'executions.log');
  let env: Record<string, string>;
  let api: TestApp;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    env = testEnv('cmdhost', countFile, { REDIS_PREFIX: uniquePrefix('cmdhost'), WORKER_CONCURRENCY: '8' });
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
  /** Starts runs that sleep `secs` each and returns them with their commands' process groups once all started. */
  async function startRuns(n: number, secs: number): Promise<{ ids: string[]; pgids: number[] }> {
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
    return { ids: runs.map((r) => r.id), pgids };
  }

  it('one host for all of a worker’s commands; kill -9 of the worker kills every command group at once', async () => {
    worker = await startProcess(env);
    const { ids, pgids } = await startRuns(3, 8);
    const pid = worker.child.pid!;
    const hosts = hostsOf(pid);
    expect(hosts).toHaveLength(1);
    expect(hosts[0].uid).toBe(process.getuid!());
    // It needs no environment, and the worker's holds onceflow's credentials.
    expect(env.API_KEYS).toBeTruthy();
    expect(readFileSync(`/proc/${hosts[0].pid}/environ`, 'utf8')).toBe('');
    // Each command runs as RUN_AS_USER and is the host's own child: no wrapper process per run.
    for (const pgid of pgids) {
      const leader = processes().find((p) => p.pid === pgid)!;
      expect(leader.ppid).toBe(hosts[0].pid);
      expect(leader.uid).not.toBe(process.getuid!());
    }
    // The command's walk up its parents passes over the host to the worker (the witness's field).
    const starts = readFileSync(countFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('start ') && ids.includes(l.split(' ')[1]));
    expect(starts).toHaveLength(3);
    for (const line of starts) expect(line).toContain(` worker=${pid}`);
    worker.child.kill('SIGKILL');
    await waitFor(() => pgids.every((g) => group(g).length === 0), 2000, 'every command group to be gone');
  });

  it('a frozen worker’s commands die within the deadline (0.8 × the lock TTL), before its lock lapses', async () => {
    worker = await startProcess(env);
    const { pgids } = await startRuns(2, 9);
    const frozenAt = Date.now();
    worker.child.kill('SIGSTOP');
    await waitFor(() => pgids.every((g) => group(g).length === 0), 5000, 'the frozen worker’s commands to die');
    // RUN_LOCK_TTL_MS is 1500: the deadline is 1200 ms after the last renewal (a beat every 500 ms).
    expect(Date.now() - frozenAt).toBeLessThan(1500 + 300);
  });

  it('a killed host: the worker kills its commands at once, a new host runs their next attempts', async () => {
    worker = await startProcess(env);
    const { ids, pgids } = await startRuns(2, 2);
    const pid = worker.child.pid!;
    const [first] = hostsOf(pid);
    process.kill(first.pid, 'SIGKILL');
    await waitFor(() => pgids.every((g) => group(g).length === 0), 2000, 'the orphaned commands to be killed');
    await waitForStatus(ids, ['SUCCESS'], 20_000);
    for (const id of ids) {
      expect(count(countFile, 'start', id)).toBe(2);
      expect(count(countFile, 'done', id)).toBe(1);
    }
    const hosts = hostsOf(pid);
    expect(hosts).toHaveLength(1);
    expect(hosts[0].pid).not.toBe(first.pid);
  });
});
