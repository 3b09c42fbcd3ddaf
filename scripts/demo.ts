import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { Client, Pool } from 'pg';
import { prepareDatabase } from '../src/database/prepare-database';
import { BOT_ACTOR, PLANE_SECRET } from '../test/support/plane';
import { SlackStub } from '../test/support/slack-stub';
import { AppProcess } from './chaos/app-process';
import { ApiClient } from './chaos/client';
import { dispatchStorm, planeStorm } from './chaos/load';
import { freePort, repoRoot, rng, waitFor } from './chaos/util';
import { Witness } from './chaos/witness';
import { collectFigures, printTable } from './demo-report';
import { STEPS_DEMO_TAG, stepsDemo } from './demo-steps';
import { LlmStub } from '../test/support/llm-stub';

/**
 * `npm run demo`: starts onceflow (API, scheduler and two workers as separate processes) against
 * the configured Postgres and Redis — in a database and Redis prefix of its own (`onceflow_demo`),
 * reset on every run, so real data is never touched — fires a duplicate dispatch storm and a
 * signed Plane webhook storm, then kills a worker in the middle of a multi-step run (steps and
 * the LLM cache, docs/steps.md), prints what happened, where to look, and stops. `--keep` leaves
 * the app running until Ctrl-C.
 */
const DEMO = 'onceflow_demo';
const ADMIN_USER = 'demo';

async function resetStores(databaseUrl: string, redis: Redis): Promise<void> {
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  const admin = new Client({ connectionString: url.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${DEMO}" WITH (FORCE)`);
  await admin.end();
  for await (const keys of redis.scanStream({ match: `${DEMO}:*`, count: 1000 }))
    if ((keys as string[]).length) await redis.del(...(keys as string[]));
}

async function main(): Promise<void> {
  const keep = process.argv.includes('--keep');
  const dbUrl = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/onceflow');
  dbUrl.pathname = `/${DEMO}`;
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
  const dir = mkdtempSync(join(tmpdir(), 'onceflow-demo-'));
  mkdirSync(join(dir, 'logs'));
  // Run commands execute as an unprivileged user: they write into this directory and run a copy
  // of the test orchestrator that anyone may read.
  chmodSync(dir, 0o777);
  const fakeOrchestrator = join(dir, 'fake-orchestrator.sh');
  copyFileSync(join(repoRoot(), 'test/support/fake-orchestrator.sh'), fakeOrchestrator);
  chmodSync(fakeOrchestrator, 0o755);
  const apiKey = `demo_${randomBytes(16).toString('hex')}`;
  const adminPassword = randomBytes(9).toString('base64url');
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
  const slack = await SlackStub.start();
  const llm = await LlmStub.start();
  const execFile = join(dir, 'executions.log');
  const witness = new Witness(execFile).start();
  let processes: AppProcess[] = [];
  let pg: Pool | undefined;
  try {
    say(`Postgres database ${DEMO} and Redis prefix ${DEMO}: (re)created for the demo`);
    await resetStores(dbUrl.toString(), redis);
    await prepareDatabase(dbUrl.toString());
    const env = {
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      DATABASE_URL: dbUrl.toString(),
      REDIS_URL: redisUrl,
      REDIS_PREFIX: DEMO,
      API_KEYS: apiKey,
      ADMIN_USER,
      ADMIN_PASSWORD: adminPassword,
      PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
      PLANE_BOT_ACTOR_IDS: BOT_ACTOR,
      PLANE_PROJECT_MAX_CONCURRENT_RUNS: '4',
      // A local stand-in for Slack: the demo never posts to a real channel.
      SLACK_WEBHOOK_URL: slack.url,
      // The storms run the test orchestrator (it records every execution for the table); the steps
      // part runs the bundled sample orchestrator, slowed down so that a worker can die mid-run.
      ORCHESTRATOR_COMMAND: `case "$RUN_REQUIREMENT" in '${STEPS_DEMO_TAG}'*) SAMPLE_STEP_PAUSE=1.5 OPENAI_API_KEY=sk-demo-not-a-real-key exec onceflow-sample-orchestrator ;; *) exec sh '${fakeOrchestrator}' '${execFile}' ;; esac`,
      // A local stand-in for the LLM provider: the demo never calls a real one.
      LLM_OPENAI_UPSTREAM: llm.openaiUrl,
      RUN_LOCK_TTL_MS: '5000',
      QUEUE_LOCK_DURATION_MS: '5000',
      QUEUE_STALLED_INTERVAL_MS: '2000',
      WORKSPACE_ROOT: join(dir, 'workspaces'),
      RECONCILE_INTERVAL_MS: '2000',
    };
    // 3000 when free (a stable URL to open), else any free port.
    const port = await freePort(Number(process.env.DEMO_PORT ?? 3000));
    const app = new AppProcess('api', 'api', env, join(dir, 'logs', 'api.log'), port);
    const scheduler = new AppProcess('scheduler', 'scheduler', env, join(dir, 'logs', 'scheduler.log'));
    const workers = [1, 2].map(
      (i) => new AppProcess(`worker-${i}`, 'worker', env, join(dir, 'logs', `worker-${i}.log`)),
    );
    processes = [app, scheduler, ...workers];
    say('starting onceflow: API, scheduler and two workers, each its own process …');
    await Promise.all(processes.map((p) => p.start()));
    const client = new ApiClient(app.url, apiKey);
    const rand = rng(Date.now());

    say('firing the storms: 20 runs × 10 concurrent dispatches, and 10 Plane work items delivered many times …');
    const [runs, plane] = await Promise.all([
      dispatchStorm({ client }, rand, { runs: 20, copies: 10, sleepMin: 0.2, sleepMax: 0.8, maxConcurrentRuns: 8 }),
      planeStorm({ client }, rand, { items: 10, copies: 5, fields: 3, botItems: 2 }),
    ]);
    pg = new Pool({ connectionString: dbUrl.toString(), max: 2, application_name: 'onceflow-demo' });
    const db = pg;
    await waitFor(
      async () =>
        (await db.query(`SELECT count(*)::int AS n FROM runs WHERE status NOT IN ('SUCCESS', 'FAILED', 'CANCELLED')`))
          .rows[0].n === 0 &&
        (await db.query(`SELECT count(*)::int AS n FROM notification_logs WHERE status = 'PENDING'`)).rows[0].n === 0,
      60_000,
      'every run to finish and be announced',
      250,
    );
    witness.poll();
    const figures = await collectFigures(db, processes, runs, plane, witness, slack);
    printTable(figures);
    await stepsDemo(client, db, workers, llm, say);
    say('');
    say(`Where to look${keep ? '' : ' (while the app runs: `npm run demo -- --keep`)'}:`);
    say(`  Bull Board   ${app.url}/admin/queues   (user ${ADMIN_USER}, password ${adminPassword})`);
    say(`  OpenAPI      ${app.url}/docs`);
    say(`  Metrics      ${app.url}/metrics`);
    say(`  Runs         curl -H 'Authorization: Bearer ${apiKey}' ${app.url}/api/runs`);
    say(`  Deliveries   curl -H 'Authorization: Bearer ${apiKey}' '${app.url}/api/webhook-deliveries?provider=plane'`);
    say(`  Data stays in database ${DEMO} and Redis prefix ${DEMO}: until the next demo. Logs: ${dir}/logs`);
    if (keep) {
      say('\nThe app keeps running; Ctrl-C stops it.');
      await new Promise<void>((resolve) => ['SIGINT', 'SIGTERM'].forEach((s) => process.once(s, () => resolve())));
    }
  } finally {
    say('stopping onceflow (SIGTERM: graceful shutdown) …');
    await Promise.all(processes.map((p) => p.stop()));
    witness.stop();
    await slack.close();
    await llm.close();
    await pg?.end();
    await redis.quit();
  }
}

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`demo: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
