import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureWorkspace } from './workspace-guard';

/** Real directories and symlinks: what a command that owned a workspace could have left behind. */
describe('ensureWorkspace', () => {
  let base: string;
  let root: string;
  let outside: string;
  beforeEach(() => {
    base = mkdtempSync(join(tmpdir(), 'onceflow-wsguard-'));
    root = join(base, 'root');
    outside = join(base, 'outside');
    mkdirSync(join(root, 'p1', 'tasks'), { recursive: true });
    mkdirSync(outside);
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  it('creates a workspace inside the root and gives it (only it) to the run user', async () => {
    const ws = join(root, 'p1', 'tasks', 't1');
    await ensureWorkspace(root, ws, { uid: 65534, gid: 65534 });
    expect(statSync(ws)).toMatchObject({ uid: 65534, gid: 65534 });
    expect(statSync(join(root, 'p1', 'tasks')).uid).toBe(process.geteuid!());
  });

  it('never creates or chowns through a symlink planted below the root', async () => {
    rmSync(join(root, 'p1', 'tasks'), { recursive: true });
    symlinkSync(outside, join(root, 'p1', 'tasks'));
    await expect(ensureWorkspace(root, join(root, 'p1', 'tasks', 't2'), { uid: 65534, gid: 65534 })).rejects.toThrow(
      /symlink below WORKSPACE_ROOT/,
    );
    expect(existsSync(join(outside, 't2'))).toBe(false);
    symlinkSync(outside, join(root, 'p2'));
    await expect(ensureWorkspace(root, join(root, 'p2'), { uid: 65534, gid: 65534 })).rejects.toThrow(
      /symlink below WORKSPACE_ROOT/,
    );
    expect(statSync(outside).uid).toBe(process.geteuid!());
  });

  it('never creates through a dangling symlink planted where the workspace goes', async () => {
    symlinkSync(join(outside, 'missing'), join(root, 'p1', 'tasks', 't4'));
    await expect(ensureWorkspace(root, join(root, 'p1', 'tasks', 't4'))).rejects.toThrow(/workspace .*t4/);
    expect(existsSync(join(outside, 'missing'))).toBe(false);
  });

  it('resolves a root that did not exist yet once it does', async () => {
    const late = join(base, 'late-root');
    await expect(ensureWorkspace(late, join(late, 'p1'))).rejects.toThrow();
    mkdirSync(late);
    await ensureWorkspace(late, join(late, 'p1'));
    expect(existsSync(join(late, 'p1'))).toBe(true);
  });

  it('refuses a workspace that is not inside the root', async () => {
    await expect(ensureWorkspace(root, root)).rejects.toThrow(/not inside WORKSPACE_ROOT/);
    await expect(ensureWorkspace(root, outside)).rejects.toThrow(/not inside WORKSPACE_ROOT/);
    await expect(ensureWorkspace(root, join(root, '..', 'outside', 'x'))).rejects.toThrow(/not inside WORKSPACE_ROOT/);
  });

  describe("for a workspace that likely exists (a run's)", () => {
    it('accepts it as it is, creates it when it is missing, and gives it to the run user', async () => {
      const ws = join(root, 'p1', 'tasks', 'e1');
      await ensureWorkspace(root, ws, { uid: 65534, gid: 65534 }, { likelyExists: true });
      expect(statSync(ws)).toMatchObject({ uid: 65534, gid: 65534 });
      await ensureWorkspace(root, ws, { uid: 65533, gid: 65533 }, { likelyExists: true });
      expect(statSync(ws)).toMatchObject({ uid: 65533, gid: 65533 });
      expect(statSync(join(root, 'p1', 'tasks')).uid).toBe(process.geteuid!());
    });

    it('refuses a workspace that is itself a symlink, or is reached through one, and chowns nothing', async () => {
      symlinkSync(outside, join(root, 'p1', 'tasks', 'e2'));
      await expect(
        ensureWorkspace(root, join(root, 'p1', 'tasks', 'e2'), { uid: 65534, gid: 65534 }, { likelyExists: true }),
      ).rejects.toThrow(/symlink below WORKSPACE_ROOT/);
      mkdirSync(join(outside, 'e3'));
      rmSync(join(root, 'p1', 'tasks'), { recursive: true });
      symlinkSync(outside, join(root, 'p1', 'tasks'));
      await expect(
        ensureWorkspace(root, join(root, 'p1', 'tasks', 'e3'), { uid: 65534, gid: 65534 }, { likelyExists: true }),
      ).rejects.toThrow(/symlink below WORKSPACE_ROOT/);
      expect(statSync(join(outside, 'e3')).uid).toBe(process.geteuid!());
      expect(statSync(outside).uid).toBe(process.geteuid!());
    });

    it('refuses a file where the workspace should be', async () => {
      writeFileSync(join(root, 'p1', 'tasks', 'e4'), 'not a directory');
      await expect(
        ensureWorkspace(root, join(root, 'p1', 'tasks', 'e4'), undefined, { likelyExists: true }),
      ).rejects.toThrow(/workspace .*e4/);
    });
  });

  it('accepts a root that is itself reached through a symlink', async () => {
    const alias = join(base, 'alias');
    symlinkSync(root, alias);
    await ensureWorkspace(alias, join(alias, 'p1', 'tasks', 't3'));
    expect(existsSync(join(root, 'p1', 'tasks', 't3'))).toBe(true);
  });
});
