import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpawnThread } from '../src/runs/executor/spawn-thread';
import { waitFor } from './support/app';

/** The thread that forks the run's commands, against real processes. */
describe('spawn thread', () => {
  const spawner = new SpawnThread(64);
  afterAll(() => spawner.stop());
  const options = { cwd: tmpdir(), env: { PATH: '/usr/bin:/bin' }, detached: true, stdio: 'pipe' as const };

  function alive(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  /** Gone, or a zombie: a child of a thread that died is reaped by nobody until the process exits. */
  function dead(pid: number): boolean {
    try {
      return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].startsWith('Z');
    } catch {
      return true;
    }
  }

  it('forks the command behind its gate, and reports its exit and the tail of what it wrote', async () => {
    const child = spawner.spawn('/bin/sh', ['-c', 'read -r go; echo "got $go"; echo oops >&2; exit 3'], options);
    const pid = await child.pid;
    expect(pid).toEqual(expect.any(Number));
    // Nothing runs past the gate until it is opened.
    await new Promise((r) => setTimeout(r, 100));
    expect(alive(pid!)).toBe(true);
    child.go();
    expect(await child.exited).toEqual({ code: 3, sig: null });
    expect((await child.output).toString()).toMatch(/^(got go\noops\n|oops\ngot go\n)$/);
  });

  it('keeps only the last bytes of a long output', async () => {
    const child = spawner.spawn(
      '/bin/sh',
      ['-c', 'i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done'],
      options,
    );
    child.go();
    expect(await child.exited).toEqual({ code: 0, sig: null });
    const out = (await child.output).toString();
    expect(out.endsWith('line1999\n')).toBe(true);
    expect(out.length).toBeLessThanOrEqual(64);
    expect(out).not.toContain('line0\n');
  });

  it('keeps only the last bytes when they come in one large read', async () => {
    // 6,000 bytes in one write: one read takes them all, so the cut is inside a chunk.
    const child = spawner.spawn('/bin/sh', ['-c', 'printf "%06000d" 0; echo end'], options);
    child.go();
    expect(await child.exited).toEqual({ code: 0, sig: null });
    const out = (await child.output).toString();
    expect(out.length).toBe(64);
    expect(out.endsWith('0end\n')).toBe(true);
  });

  it('reports a command that could not start, with the reason', async () => {
    const child = spawner.spawn('/bin/sh', ['-c', 'true'], {
      ...options,
      cwd: join(tmpdir(), 'no-such-dir-of-onceflow'),
    });
    expect(await child.pid).toBeUndefined();
    expect(await child.exited).toMatchObject({ code: null, startError: expect.stringMatching(/ENOENT/) });
  });

  it('kills a running command whose thread died, and reports it killed', async () => {
    const dying = new SpawnThread(64);
    const child = dying.spawn('/bin/sh', ['-c', 'read -r go; exec sleep 30'], options);
    const pid = (await child.pid)!;
    child.go();
    await new Promise((r) => setTimeout(r, 100));
    expect(alive(pid)).toBe(true);
    dying.stop();
    expect(await child.exited).toEqual({ code: null, sig: 'SIGKILL' });
    expect((await child.output).toString()).toMatch(/thread that forked the command died/);
    await waitFor(async () => dead(pid), 2000, 'the command to be dead');
    // A new thread forks the next one.
    const next = dying.spawn('/bin/sh', ['-c', 'exit 0'], options);
    next.go();
    expect(await next.exited).toEqual({ code: 0, sig: null });
    dying.stop();
  });
});
