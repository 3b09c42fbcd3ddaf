import { lchown, mkdir, realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, sep } from 'node:path';
import { canonicalPath } from '../workspace-path';

/**
 * Makes a run's workspace ready for its command: inside WORKSPACE_ROOT with no symlink below the
 * root (checked before and after creating it), owned by the run's user when it has one. Commands
 * own their workspaces, so an earlier command could have planted a symlink (`tasks -> /etc`);
 * the worker, running as root, must never create or chown anything through one.
 */
export async function ensureWorkspace(
  root: string,
  workspace: string,
  owner?: { uid: number; gid: number },
): Promise<void> {
  const rel = relative(root, workspace);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw new Error(`workspace ${workspace} is not inside WORKSPACE_ROOT (${root})`);
  }
  const expected = join(await realpath(root), rel);
  const escapes = (real: string) =>
    new Error(`workspace ${workspace} resolves to ${real}: a symlink below WORKSPACE_ROOT`);
  const before = await canonicalPath(workspace).catch((err: Error) => {
    throw new Error(`workspace ${workspace}: ${err.message}`);
  });
  if (before !== expected) throw escapes(before);
  await mkdir(workspace, { recursive: true });
  const after = await realpath(workspace);
  if (after !== expected) throw escapes(after);
  // The workspace itself only: everything above it stays the worker's (or the API's).
  if (owner) await lchown(workspace, owner.uid, owner.gid);
}
