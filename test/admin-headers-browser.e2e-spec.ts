import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { existsSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { BrowserContext, chromium } from 'playwright-core';
import { RUNS_QUEUE } from '../src/queues/queue-names';
import { startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv } from './support/env';

const CHROMIUM = '/usr/bin/chromium';
const USER = 'ops';
const PASSWORD = 'browser-pass-0123456789';

/**
 * What a real browser does with the admin headers: it sends Origin on the board's own PUT (which
 * must work), refuses to frame the board in another site's page, and another site's PUT through
 * the operator's browser is refused. A second local server plays the other site.
 */
describe('admin dashboard in a real browser: framing and cross-site requests', () => {
  let t: TestApp;
  let board: string;
  let evil: Server;
  let evilOrigin: string;
  let context: BrowserContext;
  let queue: Queue;
  let evilPage = '';

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
    t = await startApp(
      testEnv('browser-hdr', join(tempDir('browser-hdr'), 'executions.log'), {
        APP_ROLE: 'api',
        ADMIN_USER: USER,
        ADMIN_PASSWORD: PASSWORD,
      }),
    );
    await t.app.listen(0, '127.0.0.1');
    board = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    queue = t.app.get<Queue>(getQueueToken(RUNS_QUEUE));
    evil = createServer((_req, res) => res.setHeader('content-type', 'text/html').end(evilPage));
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    // Another port on the same host: another origin, but the same site, so Sec-Fetch-Site says
    // "same-site" and only the Origin check can tell it from the board.
    evilOrigin = `http://127.0.0.1:${(evil.address() as AddressInfo).port}`;
    context = await chromium.launchPersistentContext(tempDir('chromium-hdr'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
      ],
      timeout: 30_000,
      httpCredentials: { username: USER, password: PASSWORD },
    });
    await context.route('**/*', (route) => {
      const url = route.request().url();
      return url.startsWith(board) || url.startsWith(evilOrigin) ? route.continue() : route.abort();
    });
  });
  afterAll(async () => {
    await context?.close();
    evil?.close();
    await t?.close();
  });

  const parkedJob = () => queue.add({ runId: `browser-${Date.now()}` }, { delay: 3_600_000 });
  const clean = (jobId: string | number) => `${board}/admin/queues/api/queues/${RUNS_QUEUE}/${jobId}/clean`;

  it("lets the board's own page clean a job (the browser's Origin matches)", async () => {
    const job = await parkedJob();
    const page = await context.newPage();
    await page.goto(`${board}/admin/queues`, { waitUntil: 'domcontentloaded' });
    const status = await page.evaluate((url) => fetch(url, { method: 'PUT' }).then((r) => r.status), clean(job.id));
    expect(status).toBe(204);
    expect(await queue.getJob(job.id)).toBeNull();
    await page.close();
  });

  it("refuses another origin's POST sent through the operator's browser, and will not be framed by it", async () => {
    const page = await context.newPage();
    // The operator is logged in to the board in this browser.
    expect((await page.goto(`${board}/admin/queues`))?.status()).toBe(200);
    const add = `${board}/admin/queues/api/queues/${RUNS_QUEUE}/add`;
    const before = await queue.getDelayedCount();
    // A form-like POST needs no CORS preflight, so the browser sends it; a PUT it would not.
    const body = JSON.stringify({
      name: '__default__',
      data: { runId: 'from-another-origin' },
      options: { delay: 3_600_000 },
    });
    evilPage = `<iframe id="f" src="${board}/admin/queues"></iframe>
      <script>fetch(${JSON.stringify(add)}, { method: 'POST', mode: 'no-cors', credentials: 'include', body: ${JSON.stringify(body)} })
        .finally(() => { document.title = 'sent'; });</script>`;
    const seen: number[] = [];
    page.on('response', (r) => r.url() === add && seen.push(r.status()));
    await page.goto(evilOrigin, { waitUntil: 'load' });
    await waitFor(async () => (await page.title()) === 'sent', 10_000, "the other origin's request to be sent");
    expect(seen).toEqual([403]);
    expect(await queue.getDelayedCount()).toBe(before);

    // Blocked by frame-ancestors: Chromium puts its error page in the frame instead of the board.
    const frame = page.frames().find((f) => f !== page.mainFrame());
    expect(frame).toBeDefined();
    await waitFor(
      () => frame!.url().startsWith('chrome-error://'),
      10_000,
      `the board frame to be blocked (at ${frame!.url()})`,
    );
    await page.close();
  });
});
