// @ts-check
// Mutation testing of the exactly-once core (issue 6 item 3, issue 11 item 4). How to run and
// what the numbers mean: docs/mutation.md. Every test runs against the real Postgres and Redis,
// as in `npm test`.

import { existsSync, readFileSync } from 'node:fs';

/**
 * The code whose guards must be pinned by tests (locks, claim, dispatch, webhook intake, outbox,
 * worker, delivery), in six areas, each with the test files that are meant to pin it. A mutant
 * runs only the tests of its area that executed it (perTest), so a hot path such as the run
 * transition does not drag in every e2e file of the project. Test files that drive only compiled child processes
 * (worker-crash, notifications-crash, webhooks-logs, graceful-shutdown) are left out: a mutant
 * never reaches them. So is dispatch-storm (500 requests, 50 runs: minutes per mutant of the hot
 * path); run-dispatch pins the producer guard it exercises, deterministically. And so is
 * finalize-db-drop: under Stryker it fails most runs with an unhandled pg 'error' event (57P01,
 * see docs/mutation.md); run-finalize pins the finalize retry without killing every connection.
 */
export const AREAS = {
  locks: {
    mutate: ['src/locks/lock.service.ts', 'src/locks/heartbeat.ts', 'src/locks/task-lock.service.ts'],
    tests: ['test/locks.e2e-spec.ts', 'test/task-lock.e2e-spec.ts', 'test/task-lock-lease.e2e-spec.ts'],
    staticTests: ['test/locks.e2e-spec.ts', 'test/task-lock-lease.e2e-spec.ts'],
  },
  runs: {
    mutate: [
      'src/runs/worker/run-claim.service.ts',
      'src/runs/worker/run-claim.repository.ts',
      'src/runs/worker/run-worker.repository.ts',
      'src/runs/worker/run-outcome.ts',
      'src/runs/dispatch.service.ts',
      'src/runs/run-transitions.repository.ts',
      'src/runs/run-state-machine.ts',
      'src/runs/worker/run-finalizer.ts',
      'src/runs/worker/finalize-batch.ts',
      'src/runs/worker/claim-batch.ts',
      'src/common/batcher.ts',
      'src/runs/idempotency/idempotency.service.ts',
      'src/runs/idempotency/idempotency.repository.ts',
      'src/database/pg-statements.ts',
    ],
    tests: [
      'src/runs/**/*.spec.ts',
      'src/common/batcher.spec.ts',
      'test/api.e2e-spec.ts',
      'test/retries.e2e-spec.ts',
      'test/run-claim.e2e-spec.ts',
      'test/run-dispatch.e2e-spec.ts',
      'test/run-finalize.e2e-spec.ts',
      'test/finalize-batch.e2e-spec.ts',
      'test/claim-batch.e2e-spec.ts',
      'test/idempotency.e2e-spec.ts',
      'test/pg-statements.e2e-spec.ts',
    ],
    staticTests: [
      'src/runs/**/*.spec.ts',
      'src/common/batcher.spec.ts',
      'test/run-claim.e2e-spec.ts',
      'test/run-dispatch.e2e-spec.ts',
      'test/run-finalize.e2e-spec.ts',
      'test/finalize-batch.e2e-spec.ts',
      'test/claim-batch.e2e-spec.ts',
      'test/idempotency.e2e-spec.ts',
      'test/pg-statements.e2e-spec.ts',
    ],
  },
  webhooks: {
    mutate: [
      'src/webhooks/plane-signature.ts',
      'src/webhooks/plane-payload.ts',
      'src/webhooks/plane-intake.service.ts',
      'src/webhooks/webhook-deliveries.repository.ts',
      'src/webhooks/delivery-record-batch.ts',
      'src/webhooks/plane-event-handler.ts',
      'src/tasks/task-intake.service.ts',
    ],
    tests: [
      'src/webhooks/*.spec.ts',
      'test/webhooks-guards.e2e-spec.ts',
      'test/webhooks-idempotency.e2e-spec.ts',
      'test/webhooks-lifecycle.e2e-spec.ts',
      'test/task-intake.e2e-spec.ts',
      'test/plane-intake.e2e-spec.ts',
      'test/intake-batches.e2e-spec.ts',
    ],
    staticTests: ['src/webhooks/*.spec.ts', 'test/task-intake.e2e-spec.ts', 'test/plane-intake.e2e-spec.ts'],
  },
  outbox: {
    mutate: ['src/notifications/outbox.writer.ts', 'src/notifications/notification-claims.repository.ts'],
    tests: ['test/notifications-claims.e2e-spec.ts', 'test/notifications.e2e-spec.ts', 'test/outbox.e2e-spec.ts'],
    staticTests: ['test/outbox.e2e-spec.ts'],
  },
  // The run's path after the claim: the processor (beat checks, outcome → status), the executor
  // (exit classification, the command's environment, workspace, output tail, abort and timeout)
  // and the reconciler (reaper and queue re-enqueue). Only in-process tests: the command-isolation
  // file's first block drives dist/ and sees no mutant; reconciler.e2e (a kill -9 of a dist/ worker,
  // 20 runs through a Redis wipe: a minute per mutant) is left to queue-reconcile.e2e's direct calls.
  worker: {
    mutate: [
      'src/runs/worker/run-reaper.ts',
      'src/runs/worker/run-queue-reconciler.ts',
      'src/runs/worker/run.processor.ts',
      'src/runs/worker/attempt-runner.ts',
      'src/runs/executor/executor.ts',
      'src/runs/executor/shell-executor.ts',
      'src/runs/executor/output-tail.ts',
      'src/runs/executor/command-env.ts',
      'src/runs/executor/workspace-guard.ts',
    ],
    tests: [
      'src/runs/executor/*.spec.ts',
      'test/run-processor.e2e-spec.ts',
      'test/run-processor-lease.e2e-spec.ts',
      'test/queue-reconcile.e2e-spec.ts',
      'test/shell-executor.e2e-spec.ts',
      'test/reaper.e2e-spec.ts',
      'test/executor.e2e-spec.ts',
      'test/retries.e2e-spec.ts',
      'test/command-isolation.e2e-spec.ts',
    ],
    staticTests: [
      'src/runs/executor/*.spec.ts',
      'test/run-processor.e2e-spec.ts',
      'test/run-processor-lease.e2e-spec.ts',
      'test/executor.e2e-spec.ts',
      'test/reaper.e2e-spec.ts',
    ],
  },
  // One delivery attempt of an outbox row (claim → POST under a heartbeat → record) and its backoff.
  delivery: {
    mutate: [
      'src/notifications/notification-delivery.service.ts',
      'src/notifications/notification-claims.repository.ts',
      'src/notifications/retry-backoff.ts',
    ],
    tests: [
      'src/notifications/*.spec.ts',
      'test/notification-delivery.e2e-spec.ts',
      'test/notifications-claims.e2e-spec.ts',
      'test/notifications.e2e-spec.ts',
      'test/outbox.e2e-spec.ts',
    ],
    staticTests: ['src/notifications/*.spec.ts', 'test/notification-delivery.e2e-spec.ts', 'test/outbox.e2e-spec.ts'],
  },
};

export const MUTATE = Object.values(AREAS).flatMap((a) => a.mutate);

/** `this.logger.warn(...)`, `this.metrics.x.inc(...)`, `this.metrics?.y(...)` → ['this', 'logger', 'warn'] */
function calleeChain(node) {
  if (!node) return [];
  if (node.type === 'ThisExpression') return ['this'];
  if (node.type === 'Identifier') return [node.name];
  if (node.type === 'MemberExpression' || node.type === 'OptionalMemberExpression') {
    const prop = node.property.type === 'Identifier' ? node.property.name : '?';
    return [...calleeChain(node.object), prop];
  }
  if (node.type === 'CallExpression' || node.type === 'OptionalCallExpression') return calleeChain(node.callee);
  return [];
}

/**
 * Log lines and metric labels are not behaviour: a mutant that empties a log message or a
 * metric label is noise in the score. This ignorer drops every mutant inside a call on
 * `this.logger` or `this.metrics` (the arguments included), and nothing else.
 */
const logsAndMetrics = {
  shouldIgnore(path) {
    const node = path.node;
    if (node.type !== 'CallExpression' && node.type !== 'OptionalCallExpression') return undefined;
    const [self, field] = calleeChain(node.callee);
    if (self !== 'this') return undefined;
    if (field === 'logger') return 'log line (not behaviour)';
    if (field === 'metrics') return 'metric label (not behaviour)';
    return undefined;
  },
};

/** Loaded by `plugins` below (this file is its own plugin module). */
export const strykerPlugins = [{ kind: 'Ignore', name: 'logs-and-metrics', value: logsAndMetrics }];

const areaName = process.env.MUTATION_AREA ?? 'locks';
const area = AREAS[areaName];
if (!area) throw new Error(`MUTATION_AREA must be one of ${Object.keys(AREAS).join(', ')} (got ${areaName})`);

// MUTATION_TESTS=<substr>[,...] keeps only the area's test patterns containing one of them (a quick
// calibration); MUTATION_SKIP_TESTS=<substr>[,...] leaves matching test files out (the "before"
// column of docs/mutation.md: the area without the tests written against its survivors).
const list = (name) => (process.env[name] ?? '').split(',').filter(Boolean);
const only = list('MUTATION_TESTS');
const staticPass = process.env.MUTATION_STATIC === '1';
// A static mutant re-runs EVERY test of the area that imports its file: the static pass uses the
// area's fast, direct tests (staticTests) so that each such mutant costs seconds, not minutes.
const areaTests = staticPass ? area.staticTests : area.tests;
const tests = only.length ? areaTests.filter((t) => only.some((o) => t.includes(o))) : areaTests;
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const skipped = list('MUTATION_SKIP_TESTS').map(escape);

const out = (suffix) => `reports/mutation/${areaName}${suffix}`;

/**
 * MUTATION_STATIC=1 is the second pass, for the mutants the first one ignored as static: code that
 * runs only while a module loads or an app boots (the Lua scripts, the state-machine table, the
 * Plane action maps, defineCommand). Each needs a fresh module load and every test of the area, so
 * they run on their own, only those (their locations are read from the first pass's report).
 */
function staticRanges() {
  const report = out('.json');
  if (!existsSync(report))
    throw new Error(`MUTATION_STATIC=1 needs ${report}: run the first pass of ${areaName} before`);
  const { files } = JSON.parse(readFileSync(report, 'utf8'));
  const ranges = new Set();
  for (const [file, { mutants }] of Object.entries(files)) {
    for (const m of mutants) {
      if (m.status !== 'Ignored' || !String(m.statusReason).startsWith('Static')) continue;
      const { start, end } = m.location;
      // Stryker mutation ranges: 1-based lines, 0-based columns, end exclusive.
      ranges.add(`${file}:${start.line}:${start.column - 1}-${end.line}:${end.column - 1}`);
    }
  }
  if (!ranges.size) throw new Error(`no static mutant in ${report}`);
  return [...ranges];
}

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  plugins: ['@stryker-mutator/jest-runner', './stryker.conf.mjs'],
  testRunner: 'jest',
  jest: {
    projectType: 'custom',
    configFile: 'jest.stryker.config.js',
    config: { testMatch: tests.map((t) => `<rootDir>/${t}`), testPathIgnorePatterns: ['/node_modules/', ...skipped] },
    // Only test files that import the mutated file (directly or through the app) run for it.
    enableFindRelatedTests: true,
  },
  mutate: staticPass ? staticRanges() : area.mutate,
  ignorers: ['logs-and-metrics'],
  // perTest: each mutant runs only the tests that executed it. Code run while an e2e file's
  // beforeAll boots the app, or by a queue worker between two tests, is "static" coverage.
  coverageAnalysis: 'perTest',
  // Static-only mutants would each need every test file of the area: the first pass ignores
  // them, the static pass runs exactly those.
  ignoreStatic: !staticPass,
  // Two cores, shared with other engineers' test runs: at most two jest workers
  // (MUTATION_CONCURRENCY=1 when the machine is busy; MUTATION_TIMEOUT_MS for more headroom).
  concurrency: Number(process.env.MUTATION_CONCURRENCY ?? 2),
  // Tests boot apps and wait on queues: a mutant may legitimately take the test's own time plus
  // a worker boot. A mutant that hangs a waitFor is cut off here and counted as Timeout (detected).
  timeoutMS: Number(process.env.MUTATION_TIMEOUT_MS ?? 10_000),
  timeoutFactor: 1.5,
  // Stryker's jest-runner cannot make jest bail; test/support/stryker-environment.js does it.
  disableBail: false,
  // Every jest run in a worker boots and closes Nest apps, Bull queues and pools: start a fresh
  // worker process now and then so that leaks from mutants that break a close() do not pile up.
  maxTestRunnerReuse: 25,
  // Reuse earlier results for code and tests that did not change (the re-runs after new tests).
  incremental: true,
  incrementalFile: out(staticPass ? '-static.incremental.json' : '.incremental.json'),
  reporters: ['progress-append-only', 'clear-text', 'html', 'json'],
  htmlReporter: { fileName: out(staticPass ? '-static.html' : '.html') },
  jsonReporter: { fileName: out(staticPass ? '-static.json' : '.json') },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  tempDirName: '.stryker-tmp',
  ignorePatterns: ['reports', 'coverage', 'workspaces', 'bench/results', 'k8s', '.stryker-tmp'],
  thresholds: { high: 85, low: 70, break: null },
};
