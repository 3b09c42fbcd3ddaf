import { join } from 'node:path';
import { HealthSnapshot, SNAPSHOT_TASK } from '../src/health/health-snapshot';
import { IDEMPOTENCY_PRUNE_TASK } from '../src/runs/idempotency/idempotency-pruner';
import { DELIVERIES_PRUNE_TASK } from '../src/webhooks/webhook-deliveries.pruner';
import { ScheduledTasks } from '../src/scheduler/scheduled-tasks.service';
import { auth, closeDb, createProject, createRun, db, startApp, TestApp, waitForStatus } from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';

describe('operations: metrics, scheduled tasks, health', () => {
  const countFile = join(tempDir('ops'), 'executions.log');
  let t: TestApp;
  let twin: TestApp;

  beforeAll(async () => {
    const env = testEnv('ops', countFile, { REDIS_PREFIX: uniquePrefix('ops'), RECONCILE_INTERVAL_MS: '60000' });
    t = await startApp(env);
    twin = await startApp({ ...env, APP_ROLE: 'scheduler' });
  });
  afterAll(async () => {
    await twin.close();
    await t.close();
    await closeDb();
  });

  it('exposes runs by status, queue depth, duplicates suppressed and lock metrics', async () => {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'metrics', true);
    await waitForStatus([run.id], ['SUCCESS']);
    expect((await t.http.post(`/api/runs/${run.id}/dispatch`).set(auth)).status).toBe(409);
    expect(await t.app.get(ScheduledTasks).runOnce(SNAPSHOT_TASK)).toBe('ran');
    const res = await t.http.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/onceflow_runs\{status="SUCCESS"\} [1-9]/);
    expect(res.text).toMatch(/onceflow_queue_jobs\{queue="runs",state="waiting"\} \d+/);
    expect(res.text).toMatch(/onceflow_lock_acquisitions_total\{result="acquired"\} [1-9]/);
    expect(res.text).toMatch(/onceflow_duplicates_suppressed_total\{guard="claim"\} [1-9]/);
    expect(res.text).toMatch(/onceflow_run_duration_seconds_bucket/);
    expect(res.text).toMatch(/onceflow_process_resident_memory_bytes/);
  });

  it('runs each scheduled task on one replica at a time', async () => {
    let running = 0;
    let overlap = 0;
    let ran = 0;
    const slow = async () => {
      running++;
      overlap = Math.max(overlap, running);
      await new Promise((r) => setTimeout(r, 300));
      running--;
      ran++;
    };
    t.app.get(ScheduledTasks).register('test.slow', slow);
    twin.app.get(ScheduledTasks).register('test.slow', slow);
    const results = await Promise.all([
      t.app.get(ScheduledTasks).runOnce('test.slow'),
      twin.app.get(ScheduledTasks).runOnce('test.slow'),
    ]);
    expect(results.sort()).toEqual(['busy', 'ran']);
    expect(overlap).toBe(1);
    expect(ran).toBe(1);
  });

  it('prunes expired idempotency keys and keeps live ones', async () => {
    await db().query(
      `INSERT INTO idempotency_keys (key, fingerprint, state, expires_at) VALUES ('old-key', 'x', 'completed', now() - interval '1 second'), ('live-key', 'x', 'completed', now() + interval '1 hour')`,
    );
    expect(await t.app.get(ScheduledTasks).runOnce(IDEMPOTENCY_PRUNE_TASK)).toBe('ran');
    const { rows } = await db().query(`SELECT key FROM idempotency_keys WHERE key IN ('old-key', 'live-key')`);
    expect(rows.map((r) => r.key)).toEqual(['live-key']);
    expect(await t.app.get(HealthSnapshot).snapshot()).toBe('postgres=up redis=up');
  });

  it('prunes webhook deliveries older than the retention and keeps recent ones', async () => {
    const insert = (key: string, age: string) =>
      db().query(
        `INSERT INTO webhook_deliveries (provider, dedupe_key, payload_version, event, action, payload, received_at)
         VALUES ('plane', $1, 'v1', 'issue', 'created', '{}'::jsonb, now() - $2::interval) RETURNING id`,
        [key, age],
      );
    const old = (await insert(`ops-old-${Date.now()}`, '31 days')).rows[0].id;
    const recent = (await insert(`ops-recent-${Date.now()}`, '29 days')).rows[0].id;
    expect(await t.app.get(ScheduledTasks).runOnce(DELIVERIES_PRUNE_TASK)).toBe('ran');
    const { rows } = await db().query('SELECT id FROM webhook_deliveries WHERE id = ANY($1::uuid[])', [[old, recent]]);
    expect(rows.map((r) => r.id)).toEqual([recent]);
  });

  it('answers health probes without credentials', async () => {
    expect((await t.http.get('/health/live')).status).toBe(200);
    const ready = await t.http.get('/health/ready');
    expect(ready.status).toBe(200);
    expect(Object.keys(ready.body.details).sort()).toEqual(['postgres', 'queue:notifications', 'queue:runs', 'redis']);
  });

  it('publishes an OpenAPI document describing every API route', async () => {
    const doc = (await t.http.get('/docs-json')).body as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const r of [
      'POST /api/projects',
      'GET /api/projects',
      'GET /api/projects/{id}',
      'POST /api/projects/{id}/runs',
      'POST /api/runs/{id}/dispatch',
      'POST /api/runs/{id}/retry',
      'POST /api/runs/{id}/cancel',
      'GET /api/runs/{id}',
      'GET /api/runs/{id}/events',
      'GET /api/runs',
      'GET /api/tasks',
      'GET /api/tasks/{id}',
      'GET /api/notifications',
      'GET /api/webhook-deliveries',
      'POST /api/webhook-deliveries/{id}/replay',
      'POST /webhooks/plane',
    ]) {
      expect(routes).toContain(r);
    }
  });
});
