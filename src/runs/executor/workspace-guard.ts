import { lchown, mkdir, realpath } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, sep } from 'node:path';
import { canonicalPath } from '../workspace-path';

/**
 * WORKSPACE_ROOT resolved, per configured root. The root itself is the operator's (commands own
 * directories below it, never it or its parents), so it is resolved once per process, not on
 * every new task: each fs call here is a trip through libuv's thread pool and back, and those
 * trips were most of a new webhook delivery's latency under load.
 */
const resolvedRoots = new Map<string, Promise<string>>();

function resolvedRoot(root: string): Promise<string> {
  let resolved = resolvedRoots.get(root);
  if (!resolved) {
    resolved = realpath(root);
    resolvedRoots.set(root, resolved);
    // A root that does not exist yet is asked again next time.
    resolved.catch(() => resolvedRoots.delete(root));
  }
  return resolved;
}

/**
 * Makes a run's workspace ready for its command: inside WORKSPACE_ROOT with no symlink below the
 * root (checked before and after creating it), owned by the run's user when it has one. Commands
 * own their workspaces, so an earlier command could have planted a symlink (`tasks -> /etc`);
 * the worker, running as root, must never create or chown anything through one.
 *
 * Before: the PARENT must resolve to where it should. A symlink there would have `mkdir -p`
 * create directories through it. The workspace itself needs no check of its own before: if it is
 * a symlink, mkdir creates nothing through it (it exists, or mkdir fails on a dangling one), and
 * the check after finds it.
 */
export async function ensureWorkspace(
  root: string,
  workspace: string,
  owner?: { uid: number; gid: number },
  { likelyExists = false }: { likelyExists?: boolean } = {},
): Promise<void> {
  const rel = relative(root, workspace);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw new Error(`workspace ${workspace} is not inside WORKSPACE_ROOT (${root})`);
  }
  const expected = join(await resolvedRoot(root), rel);
  const escapes = (real: string) =>
    new Error(`workspace ${workspace} resolves to ${real}: a symlink below WORKSPACE_ROOT`);
  // A run's workspace usually exists (the project's, or the task's made at intake): one call
  // instead of three. The trailing `/.` makes a file there fail (ENOTDIR) as mkdir would; a
  // workspace that resolves anywhere but where it should goes through a symlink below the root.
  // Missing (or not a directory): the full way below, which creates it or says why not.
  if (likelyExists) {
    const real = await realpath(`${workspace}${sep}.`).catch(() => undefined);
    if (real !== undefined && real !== expected) throw escapes(real);
    if (real === expected) {
      if (owner) await lchown(workspace, owner.uid, owner.gid);
      return;
    }
  }
  const parent = await canonicalPath(dirname(join(root, rel))).catch((err: Error) => {
    throw new Error(`workspace ${workspace}: ${err.message}`);
  });
  if (parent !== dirname(expected)) throw escapes(parent);
  await mkdir(workspace, { recursive: true }).catch((err: Error) => {
    throw new Error(`workspace ${workspace}: ${err.message}`);
  });
  const after = await realpath(workspace);
  if (after !== expected) throw escapes(after);
  // The workspace itself only: everything above it stays the worker's (or the API's).
  if (owner) await lchown(workspace, owner.uid, owner.gid);
}
