import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalPath, confineToRoot } from './workspace-path';
import { RunsErrorCode } from './runs.errors';

/** Real directories and symlinks under a temp dir: the guard is about what the kernel resolves. */
describe('workspace paths', () => {
  let base: string;
  let root: string;
  let outside: string;
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'onceflow-wspath-'));
    root = join(base, 'root');
    outside = join(base, 'outside');
    mkdirSync(join(root, 'inner', 'deep'), { recursive: true });
    mkdirSync(outside);
    symlinkSync(outside, join(root, 'to-outside'));
    symlinkSync(join(root, 'inner'), join(root, 'to-inner'));
    symlinkSync(join(base, 'missing'), join(root, 'dangling'));
    symlinkSync(join(root, 'loop-b'), join(root, 'loop-a'));
    symlinkSync(join(root, 'loop-a'), join(root, 'loop-b'));
    symlinkSync(root, join(base, 'root-link'));
    writeFileSync(join(root, 'a-file'), 'x');
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  describe('canonicalPath', () => {
    it('resolves symlinks of existing paths and of the existing part of a path still to be created', async () => {
      expect(await canonicalPath(join(root, 'to-inner', 'deep'))).toBe(join(root, 'inner', 'deep'));
      expect(await canonicalPath(join(root, 'to-outside', 'new', 'dir'))).toBe(join(outside, 'new', 'dir'));
      expect(await canonicalPath(join(root, 'new', 'dir'))).toBe(join(root, 'new', 'dir'));
    });

    it('applies .. before resolving, as the path is stored and used', async () => {
      expect(await canonicalPath(`${root}/inner/../../outside`)).toBe(outside);
      expect(await canonicalPath(`${root}/to-outside/../x`)).toBe(join(root, 'x'));
    });
  });

  describe('confineToRoot', () => {
    it('accepts a directory inside the root, existing or not, and spells it under the root as configured', async () => {
      expect(await confineToRoot(root, join(root, 'inner'))).toBe(join(root, 'inner'));
      expect(await confineToRoot(root, join(root, 'to-inner', 'new'))).toBe(join(root, 'inner', 'new'));
      expect(await confineToRoot(join(base, 'root-link'), join(root, 'inner'))).toBe(join(base, 'root-link', 'inner'));
      expect(await confineToRoot(root, join(base, 'root-link', 'new'))).toBe(join(root, 'new'));
    });

    it.each([
      ['/', () => '/', /must resolve inside WORKSPACE_ROOT/],
      ['the root itself', () => root, /not WORKSPACE_ROOT itself/],
      ['the root with a trailing slash', () => `${root}/`, /not WORKSPACE_ROOT itself/],
      ['a .. escape', () => `${root}/inner/../../outside`, /must resolve inside WORKSPACE_ROOT/],
      ['a sibling that starts like the root', () => `${root}-other/x`, /must resolve inside WORKSPACE_ROOT/],
      [
        'a symlink inside the root pointing outside',
        () => join(root, 'to-outside'),
        /must resolve inside WORKSPACE_ROOT/,
      ],
      [
        'a new directory under that symlink',
        () => join(root, 'to-outside', 'new'),
        /must resolve inside WORKSPACE_ROOT/,
      ],
      ['a dangling symlink', () => join(root, 'dangling', 'x'), /dangling symlink/],
      ['a symlink loop', () => join(root, 'loop-a', 'x'), /symlink loop/],
      ['a file', () => join(root, 'a-file'), /not a directory/],
      ['a path through a file', () => join(root, 'a-file', 'x'), /not a directory/],
    ])('refuses %s with a 400', async (_name, path, message) => {
      await expect(confineToRoot(root, path())).rejects.toMatchObject({
        code: RunsErrorCode.WORKSPACE_INVALID,
        message: expect.stringMatching(message),
      });
    });
  });
});
