import { chmodSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../../config/app-config';

/** Who a run's command runs as. */
export type RunIdentity = { kind: 'same' } | { kind: 'user'; name: string; uid: number; gid: number };

/** The default RUN_AS_USER: present on Debian and in the official Node images. */
export const DEFAULT_RUN_USER = 'nobody';

const CAP_SETGID = 6;
const CAP_SETUID = 7;

/** Whether this process may start a child as another user (root, or CAP_SETUID and CAP_SETGID). */
export function maySwitchUsers(status = readProc('/proc/self/status')): boolean {
  const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(status ?? '');
  if (!eff) return process.geteuid?.() === 0;
  const caps = BigInt(`0x${eff[1]}`);
  return ((caps >> BigInt(CAP_SETUID)) & 1n) === 1n && ((caps >> BigInt(CAP_SETGID)) & 1n) === 1n;
}

/** `name` from /etc/passwd, or `uid:gid`. */
export function lookupUser(
  spec: string,
  passwd = readProc('/etc/passwd') ?? '',
): { name: string; uid: number; gid: number } | undefined {
  const numeric = /^(\d+):(\d+)$/.exec(spec);
  if (numeric) return { name: spec, uid: Number(numeric[1]), gid: Number(numeric[2]) };
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid] = line.split(':');
    if (name === spec && /^\d+$/.test(uid ?? '') && /^\d+$/.test(gid ?? ''))
      return { name, uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

/**
 * Resolves RUN_AS_USER for a worker, or refuses to start it (ConfigError: one line, no stack).
 * A command running as the worker's own user can read the worker's memory and environment
 * (`/proc/<pid>/environ`), so that takes an explicit `RUN_AS_USER=same`. Otherwise the command
 * runs as an unprivileged user, which needs a worker that may switch users.
 */
export function resolveRunIdentity(
  runAsUser: string | undefined,
  canSwitch = maySwitchUsers(),
  passwd?: string,
): RunIdentity {
  if (runAsUser === 'same') return { kind: 'same' };
  const spec = runAsUser ?? DEFAULT_RUN_USER;
  if (!canSwitch) {
    throw new ConfigError(
      `RUN_AS_USER=${spec}: this worker may not start commands as another user (run it as root or with CAP_SETUID and CAP_SETGID); ` +
        'set RUN_AS_USER=same to let commands run as the worker itself — they can then read its memory and secrets',
    );
  }
  const user = lookupUser(spec, passwd);
  if (!user) throw new ConfigError(`RUN_AS_USER=${spec}: no such user (give a user name or uid:gid)`);
  if (user.uid === 0)
    throw new ConfigError(`RUN_AS_USER=${spec} is root: give an unprivileged user (or "same" to run as the worker)`);
  return { kind: 'user', ...user };
}

/**
 * WORKSPACE_ROOT must let the run's user reach its own workspace below it: the root is made
 * traversable (not listable) by others when the worker owns it. Workspaces themselves are
 * owned by the run's user; everything above them stays the worker's.
 */
export function prepareWorkspaceRoot(root: string, identity: RunIdentity): void {
  mkdirSync(root, { recursive: true });
  if (identity.kind !== 'user') return;
  const st = statSync(root);
  if ((st.mode & 0o001) === 0 && st.uid === process.geteuid?.()) chmodSync(root, (st.mode & 0o7777) | 0o011);
}

function readProc(path: string): string | undefined {
  return existsSync(path) ? readFileSync(path, 'utf8') : undefined;
}
