import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The browser of test/admin-browser.e2e-spec.ts: Debian's chromium package. Never a browser
 * downloaded from anywhere else: when it is missing, the test setup installs it from Debian's
 * packages if this process may (root, apt-get), once per test run; otherwise the test fails with
 * one line saying what to run.
 */
export const CHROMIUM = '/usr/bin/chromium';
export const BROWSER_SPEC = join(__dirname, '..', 'admin-browser.e2e-spec.ts');
const APT_GET = '/usr/bin/apt-get';
// Waits for the dpkg lock rather than failing when another apt run (or test run) holds it.
export const INSTALL_COMMAND = 'apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium';

/** What the setup looks at and runs; the real machine unless a unit test says otherwise. */
export interface Host {
  exists(path: string): boolean;
  isRoot(): boolean;
  /** Runs a shell command; `output` holds the end of what it printed. */
  run(command: string): { ok: boolean; output: string };
}

const machine: Host = {
  exists: existsSync,
  isRoot: () => process.getuid?.() === 0,
  run(command) {
    const res = spawnSync('sh', ['-c', command], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      encoding: 'utf8',
      timeout: 15 * 60_000,
    });
    const printed = res.error ? String(res.error) : `exit ${res.status}: ${res.stderr || res.stdout}`;
    return { ok: res.status === 0, output: printed.trim().split('\n').slice(-3).join(' | ') };
  },
};

/** The one line a person reads when the browser is missing: what to run, exactly. */
export function missingChromiumMessage(host: Host = machine): string {
  if (!host.exists(APT_GET))
    return `${CHROMIUM} is missing: install Chromium so that ${CHROMIUM} runs it (Debian: apt-get install chromium)`;
  const sudo = host.isRoot() ? '' : 'sudo ';
  return `${CHROMIUM} is missing; run: ${sudo}apt-get update && ${sudo}apt-get install -y chromium`;
}

/** True when the patterns jest was given (none: every test) select the browser test. */
export function runsBrowserTest(testPathPatterns: string[]): boolean {
  return testPathPatterns.length === 0 || testPathPatterns.some((p) => new RegExp(p, 'i').test(BROWSER_SPEC));
}

/**
 * Installs Debian's chromium when it is missing and this process may. Called from the jest global
 * setup; says what it does through `log`. A failure is reported, not thrown: the browser test then
 * fails with `missingChromiumMessage()`, and the other tests still run.
 */
export function ensureChromium(log: (line: string) => void, host: Host = machine): void {
  if (host.exists(CHROMIUM) || !host.isRoot() || !host.exists(APT_GET)) return;
  log(
    `test setup: ${CHROMIUM} is missing; installing Debian's chromium for the browser test (${INSTALL_COMMAND}), a minute or two...`,
  );
  const started = Date.now();
  const res = host.run(INSTALL_COMMAND);
  const seconds = Math.round((Date.now() - started) / 1000);
  if (host.exists(CHROMIUM)) log(`test setup: chromium installed from Debian's packages in ${seconds} s`);
  else {
    const why = res.ok ? `apt-get succeeded, yet ${CHROMIUM} is not there` : res.output;
    log(`test setup: installing chromium failed after ${seconds} s (${why}); the browser test will fail`);
  }
}
