/**
 * The program of a worker's command host (run with `node -e`, so it needs no file of its own in
 * the build): one small process per worker forks every command that worker runs and guards it.
 * Forking from the worker itself copied the page tables of a ~150 MB process for every command,
 * and every page the worker then touched took a copy-on-write fault; from this process, whose
 * heap is a few MB, a fork is cheap and the worker's memory is never shared with a child.
 *
 * It reads JSON lines from stdin, a pipe only the worker holds the other end of:
 *   {t:'spawn', id, at, file, args, cwd, env, uid?, gid?}
 *                   fork it (its own process group, stdio piped), guard the group at once until
 *                   `at` (ms of the machine's monotonic clock, which every process shares), announce
 *                   it, then write the gate's line to its stdin and close it: the command may run
 *   {t:'watch', pgid, at}   a keep-alive: the worker still holds the run's lock; move the deadline
 *   {t:'release', pgid}     the attempt is over: kill whatever is left of the group, forget it
 * and answers on fd 3 (a pipe, written asynchronously: a frozen worker that stops reading must not
 * block the deadlines):
 *   {t:'pid', id, pid}                      it exists, and is guarded
 *   {t:'exit', id, code, sig, startError?}  it exited (or never started: spawn failed)
 *   {t:'closed', id, tail}                  its output closed, or a second passed since its exit:
 *                                           the last `tailBytes` bytes it wrote (base64)
 * EOF on stdin means the worker is gone (kill -9, OOM, exit): every group is killed at once and the
 * host exits. A deadline that passes means the worker is frozen (SIGSTOP, a stalled VM) and its
 * lock is about to lapse: the group dies before another worker can start the run. A command is
 * guarded from the moment it is forked, and it runs only once its pid is in the worker's pipe: a
 * host that dies before announcing a command closes the gate's pipe instead, and the command exits
 * without running anything; one that dies after it leaves the worker a pid to kill.
 * Plain JavaScript in a string: it must not depend on anything the build or the tests transform.
 */
export const COMMAND_HOST_PROGRAM = `'use strict';
const { spawn } = require('node:child_process');
const net = require('node:net');
const MARKER = process.argv[1];
const LIMIT = Number(process.argv[2]);
// Its name in /proc (comm and cmdline): not "node", so a command that walks up its parents to find
// the worker that runs it passes over its host.
process.title = MARKER;
const out = new net.Socket({ fd: 3, readable: false });
out.on('error', () => undefined);
const send = (m) => out.write(JSON.stringify(m) + '\\n');
const now = () => Number(process.hrtime.bigint() / 1000000n);
const kill = (pgid) => {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {}
};
const deadlines = new Map();
function watch(pgid, at) {
  clearTimeout(deadlines.get(pgid));
  // A deadline already past (the line waited in the pipe) kills at once. setTimeout fires at once
  // past 2^31 - 1 ms: a longer deadline is as good as none.
  const ms = Math.min(2147483647, Math.max(0, (Number(at) || 0) - now()));
  deadlines.set(pgid, setTimeout(() => (deadlines.delete(pgid), kill(pgid)), ms));
}
function release(pgid) {
  clearTimeout(deadlines.get(pgid));
  deadlines.delete(pgid);
  kill(pgid);
}
// The chunks kept can hold more than LIMIT bytes (one read can bring 64 KB): cut to the last LIMIT.
function tailOf(chunks) {
  const all = Buffer.concat(chunks);
  return all.subarray(Math.max(0, all.length - LIMIT)).toString('base64');
}
function start(m) {
  const chunks = [];
  let size = 0;
  const push = (c) => {
    chunks.push(c);
    size += c.length;
    while (size - chunks[0].length >= LIMIT) size -= chunks.shift().length;
  };
  const options = { cwd: m.cwd, env: m.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] };
  if (m.uid !== undefined) options.uid = m.uid;
  if (m.gid !== undefined) options.gid = m.gid;
  let child;
  try {
    child = spawn(m.file, m.args, options);
  } catch (err) {
    send({ t: 'exit', id: m.id, code: null, sig: null, startError: String(err && err.message) });
    send({ t: 'closed', id: m.id, tail: '' });
    return;
  }
  child.stdin.on('error', () => undefined);
  if (child.pid !== undefined) {
    watch(child.pid, m.at);
    send({ t: 'pid', id: m.id, pid: child.pid });
    // The gate opens only once the pid is in the worker's pipe: if this process dies before that
    // line is written, the gate's pipe closes instead and the command exits without running.
    child.stdin.end('go\\n');
  }
  child.stdout.on('data', push);
  child.stderr.on('data', push);
  let exited = false;
  const exit = (r) => {
    if (exited) return;
    exited = true;
    send(Object.assign({ t: 'exit', id: m.id }, r));
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      send({ t: 'closed', id: m.id, tail: tailOf(chunks) });
    };
    const timer = setTimeout(close, 1000);
    if (child.stdout.destroyed && child.stderr.destroyed) close();
    else child.once('close', close);
  };
  child.once('error', (err) => exit({ code: null, sig: null, startError: String(err && err.message) }));
  child.once('exit', (code, sig) => exit({ code, sig }));
}
let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  for (let nl = pending.indexOf('\\n'); nl >= 0; nl = pending.indexOf('\\n')) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      continue;
    }
    if (m.t === 'spawn') start(m);
    else if (Number.isInteger(m.pgid) && m.pgid > 1) {
      if (m.t === 'watch' && deadlines.has(m.pgid)) watch(m.pgid, m.at);
      else if (m.t === 'release') release(m.pgid);
    }
  }
});
const end = () => {
  for (const pgid of deadlines.keys()) kill(pgid);
  process.exit(0);
};
process.stdin.on('end', end);
process.stdin.on('error', end);
`;

/**
 * Now on the machine's monotonic clock (CLOCK_MONOTONIC, in ms), the clock the host's deadlines
 * are written in: the same in every process, and it never jumps with the wall clock.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1000000n);
}

/** The host's name in /proc: its comm and the start of its cmdline (at most 15 characters, as comm keeps). */
export const COMMAND_HOST_MARKER = 'onceflow-host';
