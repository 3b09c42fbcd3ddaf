import {
  BROWSER_SPEC,
  CHROMIUM,
  ensureChromium,
  Host,
  INSTALL_COMMAND,
  missingChromiumMessage,
  runsBrowserTest,
} from './chromium';

/** A machine as the setup sees it; `run` records the commands and may install the browser. */
function fakeHost(opts: { chromium: boolean; root: boolean; apt: boolean; installWorks?: boolean }) {
  const files = new Set([...(opts.chromium ? [CHROMIUM] : []), ...(opts.apt ? ['/usr/bin/apt-get'] : [])]);
  const commands: string[] = [];
  const host: Host = {
    exists: (path) => files.has(path),
    isRoot: () => opts.root,
    run: (command) => {
      commands.push(command);
      if (opts.installWorks) files.add(CHROMIUM);
      return {
        ok: Boolean(opts.installWorks),
        output: opts.installWorks ? 'exit 0' : 'exit 100: E: Unable to locate package chromium',
      };
    },
  };
  return { host, commands };
}

describe('the browser of the Bull Board test', () => {
  it("installs Debian's chromium when it is missing and the setup is root with apt-get, and says so", () => {
    const { host, commands } = fakeHost({ chromium: false, root: true, apt: true, installWorks: true });
    const lines: string[] = [];
    ensureChromium((l) => lines.push(l), host);
    expect(commands).toEqual([INSTALL_COMMAND]);
    expect(INSTALL_COMMAND).toMatch(/^apt-get update -qq && apt-get install -y .*chromium$/);
    expect(lines).toEqual([
      expect.stringContaining(`${CHROMIUM} is missing; installing Debian's chromium`),
      expect.stringMatching(/chromium installed/),
    ]);
  });

  it.each([
    ['it is there already', { chromium: true, root: true, apt: true }],
    ['the setup is not root', { chromium: false, root: false, apt: true }],
    ['there is no apt-get', { chromium: false, root: true, apt: false }],
  ])('installs nothing when %s', (_name, machine) => {
    const { host, commands } = fakeHost(machine);
    const lines: string[] = [];
    ensureChromium((l) => lines.push(l), host);
    expect(commands).toEqual([]);
    expect(lines).toEqual([]);
  });

  it('reports a failed install in one line and does not throw (the browser test then fails)', () => {
    const { host } = fakeHost({ chromium: false, root: true, apt: true, installWorks: false });
    const lines: string[] = [];
    expect(() => ensureChromium((l) => lines.push(l), host)).not.toThrow();
    expect(lines[1]).toMatch(
      /installing chromium failed after \d+ s \(exit 100: E: Unable to locate package chromium\); the browser test will fail/,
    );
  });

  it('tells a person exactly what to run, in one line', () => {
    expect(missingChromiumMessage(fakeHost({ chromium: false, root: true, apt: true }).host)).toBe(
      '/usr/bin/chromium is missing; run: apt-get update && apt-get install -y chromium',
    );
    expect(missingChromiumMessage(fakeHost({ chromium: false, root: false, apt: true }).host)).toBe(
      '/usr/bin/chromium is missing; run: sudo apt-get update && sudo apt-get install -y chromium',
    );
  });

  it('is prepared only when the run includes the browser test', () => {
    expect(runsBrowserTest([])).toBe(true);
    expect(runsBrowserTest(['test/admin-browser'])).toBe(true);
    expect(runsBrowserTest(['admin'])).toBe(true);
    expect(runsBrowserTest(['src/config', 'test/api.e2e-spec.ts'])).toBe(false);
    expect(BROWSER_SPEC).toMatch(/\/test\/admin-browser\.e2e-spec\.ts$/);
  });
});
