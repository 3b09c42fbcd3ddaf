/**
 * The program of a worker's command watchdog (run with `node -e`, so it needs no file of its own
 * in the build): one process per worker guards every command that worker starts. It reads lines
 * from stdin, a pipe only the worker holds the other end of:
 *   `W <pgid> <ms>`  watch the process group; kill it unless another `W` for it comes within ms
 *   `X <pgid>`       the attempt is over: kill whatever is left of the group and forget it
 * EOF on stdin means the worker is gone (kill -9, OOM, exit): every group it knows is killed at once
 * and the watchdog exits. A deadline that passes means the worker is frozen (SIGSTOP, a stalled VM)
 * and its lock is about to lapse: the group dies before another worker can start the run.
 * Plain JavaScript in a string: it must not depend on anything the build or the tests transform.
 */
export const WATCHDOG_PROGRAM = `'use strict';
const timers = new Map();
const kill = (pgid) => {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {}
};
const forget = (pgid) => {
  clearTimeout(timers.get(pgid));
  timers.delete(pgid);
};
let pending = '';
process.stdin.setEncoding('latin1');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  for (let nl = pending.indexOf('\\n'); nl >= 0; nl = pending.indexOf('\\n')) {
    const [op, rawPgid, rawMs] = pending.slice(0, nl).split(' ');
    pending = pending.slice(nl + 1);
    const pgid = Number(rawPgid);
    if (!Number.isInteger(pgid) || pgid <= 1) continue;
    forget(pgid);
    if (op === 'W') {
      // setTimeout fires at once past 2^31 - 1 ms: a longer deadline is as good as none.
      const ms = Math.min(2147483647, Math.max(0, Number(rawMs) || 0));
      timers.set(pgid, setTimeout(() => (timers.delete(pgid), kill(pgid)), ms));
    } else if (op === 'X') kill(pgid);
  }
});
const end = () => {
  for (const pgid of timers.keys()) kill(pgid);
  process.exit(0);
};
process.stdin.on('end', end);
process.stdin.on('error', end);
`;

/** In the watchdog's command line, so it can be told from the worker's other children. */
export const WATCHDOG_MARKER = 'onceflow-watchdog';
