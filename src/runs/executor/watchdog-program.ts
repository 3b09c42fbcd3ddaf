/**
 * The program of a worker's command watchdog (run with `node -e`, so it needs no file of its own
 * in the build): one process per worker guards every command that worker starts. It reads lines
 * from stdin, a pipe only the worker holds the other end of:
 *   `W <pgid> <at>`  watch the process group; kill it at `at` (ms of the machine's monotonic clock,
 *                    which every process shares) unless another `W` for it moves the deadline
 *   `X <pgid>`       the attempt is over: kill whatever is left of the group and forget it
 * EOF on stdin means the worker is gone (kill -9, OOM, exit): every group it knows is killed at once
 * and the watchdog exits. A deadline that passes means the worker is frozen (SIGSTOP, a stalled VM)
 * and its lock is about to lapse: the group dies before another worker can start the run.
 * Plain JavaScript in a string: it must not depend on anything the build or the tests transform.
 */
export const WATCHDOG_PROGRAM = `'use strict';
const timers = new Map();
const now = () => Number(process.hrtime.bigint() / 1000000n);
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
    const [op, rawPgid, rawAt] = pending.slice(0, nl).split(' ');
    pending = pending.slice(nl + 1);
    const pgid = Number(rawPgid);
    if (!Number.isInteger(pgid) || pgid <= 1) continue;
    forget(pgid);
    if (op === 'W') {
      // A deadline already past (the line waited in the pipe) kills at once. setTimeout fires at
      // once past 2^31 - 1 ms: a longer deadline is as good as none.
      const ms = Math.min(2147483647, Math.max(0, (Number(rawAt) || 0) - now()));
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

/**
 * Now on the machine's monotonic clock (CLOCK_MONOTONIC, in ms), the clock the watchdog's deadlines
 * are written in: the same in every process, and it never jumps with the wall clock.
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1000000n);
}

/** In the watchdog's command line, so it can be told from the worker's other children. */
export const WATCHDOG_MARKER = 'onceflow-watchdog';
