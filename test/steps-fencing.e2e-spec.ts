import Redis from 'ioredis';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LockService } from '../src/locks/lock.service';
import { LOCK_SERVICE } from '../src/locks/locks.tokens';
import { runLockKey } from '../src/queues/job-ids';
import { auth, closeDb, createProject, createRun, db, startApp, TestApp, waitFor } from './support/app';
import { tempDir, testEnv, testRedisUrl } from './support/env';

/**
 * Two fences stand between an attempt that lost its run and the step journal, and each must hold
 * on its own: the credential (revoked the moment the lease is lost) and the statement (conditional
 * on the run being RUNNING under the attempt's fencing token). Each test reaches a state where only
 * one of them can refuse: a long lock TTL keeps the next heartbeat — and the next attempt — away.
 * (The credential dies when the lease is lost or the attempt ends, whichever comes first.)
 *
 * The command starts a process in a session of its own (the group kill misses it) that waits for a
 * go file, then calls `onceflow step late` — whose command would append to the effects file.
 */
describe('steps: each fence holds on its own', () => {
  const dir = tempDir('steps-fence');
  let t: TestApp;
  let redis: Redis;

  beforeAll(async () => {
    const script = join(dir, 'late-step.sh');
    writeFileSync(
      script,
      // The escaped process gives up after a minute: a failed or interrupted test leaves no orphan.
      `d="$1"
setsid sh -c 'i=0; while [ ! -e "$1/go.$RUN_ID" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
onceflow step late -- sh -c "echo late-effect >> \\"$1/effects.$RUN_ID\\""
echo $? > "$1/exit.$RUN_ID"' sh "$d" </dev/null >/dev/null 2>&1 &
touch "$d/ready.$RUN_ID"
sleep 30`,
    );
    t = await startApp(
      testEnv('steps-fence', join(dir, 'unused'), {
        ORCHESTRATOR_COMMAND: `sh '${script}' '${dir}'`,
        RUN_LOCK_TTL_MS: '30000',
      }),
    );
    redis = new Redis(testRedisUrl());
  });
  afterAll(async () => {
    await t.close();
    await redis.quit();
    await closeDb();
  });

  async function started(): Promise<string> {
    const project = await createProject(t.http);
    const run = await createRun(t.http, project.id, 'late step', true);
    await waitFor(() => existsSync(join(dir, `ready.${run.id}`)), 15_000, 'the command to start its late process');
    return run.id;
  }

  async function lateStep(runId: string): Promise<{ exit: string; effect: boolean; rows: number }> {
    writeFileSync(join(dir, `go.${runId}`), '');
    await waitFor(() => existsSync(join(dir, `exit.${runId}`)), 15_000, 'the late step call to end');
    const { rows } = await db().query(`SELECT name FROM run_steps WHERE run_id = $1`, [runId]);
    return {
      exit: readFileSync(join(dir, `exit.${runId}`), 'utf8').trim(),
      effect: existsSync(join(dir, `effects.${runId}`)),
      rows: rows.length,
    };
  }

  it('the statement refuses a run cancelled a moment ago, while the credential still works (the next beat is seconds away)', async () => {
    const runId = await started();
    await t.http.post(`/api/runs/${runId}/cancel`).set(auth).expect(202);
    expect(await lateStep(runId)).toEqual({ exit: '3', effect: false, rows: 0 });
  });

  it('the credential refuses an attempt whose lease was lost, while Postgres still says RUNNING under its token', async () => {
    const runId = await started();
    // The lock is another owner's now (it lapsed and was taken): the next beat loses the lease.
    const locks = t.app.get<LockService>(LOCK_SERVICE);
    await redis.set(locks.lockKey(runLockKey(runId)), 'another-worker', 'PX', 60_000);
    await waitFor(
      async () => {
        const m = await t.http.get('/metrics');
        return /onceflow_lock_losses_total\{reason="extend_failed"\} [1-9]/.test(m.text);
      },
      20_000,
      'the lease to be lost at the next heartbeat',
    );
    const { rows } = await db().query(`SELECT status FROM runs WHERE id = $1`, [runId]);
    expect(rows[0].status).toBe('RUNNING');
    expect(await lateStep(runId)).toEqual({ exit: '3', effect: false, rows: 0 });
  });
});
