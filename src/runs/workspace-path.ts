import { lstat, realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { RunsError, RunsErrorCode } from './runs.errors';

const invalid = (message: string) => new RunsError(RunsErrorCode.WORKSPACE_INVALID, message);

/**
 * The path the kernel would reach, with every symlink resolved, also for a path that does not
 * exist yet: the deepest existing ancestor is resolved and the rest appended (that rest holds no
 * symlink, since none of it exists). `..` is applied lexically first, which is also what the
 * caller stores and uses from then on, so the answer is the path actually used.
 */
export async function canonicalPath(path: string): Promise<string> {
  let existing = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      return join(await realpath(existing), ...rest);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTDIR') throw invalid(`workspacePath goes through a file that is not a directory: ${existing}`);
      if (code === 'ELOOP') throw invalid(`workspacePath goes through a symlink loop: ${existing}`);
      if (code !== 'ENOENT') throw err;
      // A symlink whose target is missing today could be pointed anywhere tomorrow.
      if (
        await lstat(existing).then(
          () => true,
          () => false,
        )
      )
        throw invalid(`workspacePath goes through a dangling symlink: ${existing}`);
      const parent = dirname(existing);
      if (parent === existing) throw err;
      rest.unshift(existing.slice(parent.length).replace(/^[/\\]/, ''));
      existing = parent;
    }
  }
}

/**
 * Where a requested project workspace really is, spelled under `root` as configured (so it
 * compares textually with the default `<root>/<project id>` paths): it must resolve, symlinks
 * included, strictly inside the root, and be a directory if it exists.
 */
export async function confineToRoot(root: string, requested: string): Promise<string> {
  const [realRoot, real] = await Promise.all([canonicalPath(root), canonicalPath(requested)]);
  const rel = relative(realRoot, real);
  if (rel === '') throw invalid('workspacePath must be a directory inside WORKSPACE_ROOT, not WORKSPACE_ROOT itself');
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw invalid(`workspacePath must resolve inside WORKSPACE_ROOT (${root}), symlinks included`);
  }
  const info = await stat(real).catch(() => null);
  if (info && !info.isDirectory()) throw invalid(`workspacePath exists and is not a directory: ${real}`);
  return join(root, rel);
}
