// Test file order under Stryker: unit specs, then the direct service tests, then the slow e2e
// files. With the bail of stryker-environment.js, a mutant a fast test kills never boots the
// slow ones. (Jest's default runs the slowest files first.)
const Sequencer = require('@jest/test-sequencer').default;

const SLOW = [
  'api.e2e',
  'retries.e2e',
  'reconciler.e2e',
  'command-isolation',
  'finalize-db-drop',
  'dispatch-storm',
  'task-lock.e2e',
  'webhooks-',
  'notifications',
];
// MUTATION_NEW_TESTS=<substr>,... runs those files LAST: with the bail, a mutant's first killer is
// then an older test whenever one kills it, so one run tells the score with and without them.
const NEW = (process.env.MUTATION_NEW_TESTS ?? '').split(',').filter(Boolean);
// Files that call one service directly on prepared rows (one app boot, tests of milliseconds): after
// the unit specs, before the e2e files that drive real commands through the queue.
const DIRECT = ['run-processor.e2e', 'queue-reconcile.e2e', 'shell-executor.e2e', 'reaper.e2e', 'notification-delivery.e2e'];
const rank = (path) =>
  NEW.some((s) => path.includes(s))
    ? 3
    : path.endsWith('.spec.ts')
      ? 0
      : DIRECT.some((s) => path.includes(s))
        ? 0.5
        : SLOW.some((s) => path.includes(s))
          ? 2
          : 1;

class StrykerSequencer extends Sequencer {
  sort(tests) {
    return [...tests].sort((a, b) => rank(a.path) - rank(b.path) || a.path.localeCompare(b.path));
  }
}

module.exports = StrykerSequencer;
