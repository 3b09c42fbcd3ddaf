import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { BrowserContext, chromium } from 'playwright-core';
import { RUNS_QUEUE, RunJobData } from '../src/queues/queue-names';
import { closeDb, createProject, createRun, startApp, TestApp } from './support/app';
import { CHROMIUM, missingChromiumMessage } from './support/chromium';
import { tempDir, testEnv } from './support/env';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SCREENSHOT = '/tmp/onceflow-board.png';
const USER = 'ops';
const PASSWORD = 'browser-pass-0123456789';

async function openBrowser(
  origin: string,
  credentials: { username: string; password: string },
): Promise<BrowserContext> {
  const context = await chromium.launchPersistentContext(tempDir('chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: 30_000,
    httpCredentials: { ...credentials, origin },
  });
  // The board links a web font; keep the test hermetic: nothing leaves this machine.
  await context.route('**/*', (route) => (route.request().url().startsWith(origin) ? route.continue() : route.abort()));
  return context;
}

describe('Bull Board in a real browser', () => {
  let t: TestApp;
  let origin: string;

  beforeAll(async () => {
    // Fail, never skip: a skipped browser test would hide a CI image without chromium. The global
    // setup has installed it if it could; otherwise one line (no stack) says what to run.
    if (!existsSync(CHROMIUM)) {
      const missing = new Error(missingChromiumMessage());
      missing.stack = missing.message;
      throw missing;
    }
    // Role api only: no worker takes the job, so it stays waiting for the board to show.
    t = await startApp(
      testEnv('browser', join(tempDir('browser'), 'executions.log'), {
        APP_ROLE: 'api',
        ADMIN_USER: USER,
        ADMIN_PASSWORD: PASSWORD,
      }),
    );
    await t.app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await t?.close();
    await closeDb();
  });

  it('logs in with basic auth and sees a waiting job in the runs queue', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'shown in the browser', true);
    const queue = t.app.get<Queue<RunJobData>>(getQueueToken(RUNS_QUEUE));
    const job = (await queue.getWaiting()).find((j) => j.data.runId === run.id);
    expect(job).toBeDefined();

    const context = await openBrowser(origin, { username: USER, password: PASSWORD });
    try {
      const page = await context.newPage();
      const res = await page.goto(`${origin}/admin/queues/queue/${RUNS_QUEUE}?status=waiting`, {
        waitUntil: 'domcontentloaded',
      });
      expect(res?.status()).toBe(200);
      // The job card shows the job id; the run id is part of it, and it appears only once the
      // page has fetched the queue through the authenticated JSON API.
      await page.getByText(String(job!.id)).first().waitFor({ state: 'visible', timeout: 20_000 });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
    } finally {
      await context.close();
    }
  });

  it('is refused with a Basic challenge, and shows no board, with wrong credentials', async () => {
    const context = await openBrowser(origin, { username: USER, password: `${PASSWORD}-wrong` });
    try {
      const page = await context.newPage();
      // Chromium answers the challenge with the wrong pair once, then shows the 401 it got back.
      const res = await page.goto(`${origin}/admin/queues`, { waitUntil: 'domcontentloaded' });
      expect(res?.status()).toBe(401);
      expect(await res?.headerValue('www-authenticate')).toBe('Basic realm="onceflow"');
      expect(await page.content()).not.toContain('__UI_CONFIG__');
    } finally {
      await context.close();
    }
  });
});
