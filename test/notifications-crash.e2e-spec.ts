import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { join } from 'node:path';
import { NOTIFICATIONS_QUEUE } from '../src/queues/queue-names';
import {
  auth,
  closeDb,
  createProject,
  createRun,
  startApp,
  startProcess,
  TestApp,
  waitFor,
  WorkerProcess,
} from './support/app';
import { tempDir, testEnv } from './support/env';
import { SlackStub } from './support/slack-stub';

/**
 * A real worker process is killed -9 after it claimed a notification and while Slack has its
 * POST (the stub holds it open and counts it as not delivered when the socket dies). Another
 * process must deliver the message once its claim lease lapses. Needs a fresh dist/ build.
 */
describe('notifications: the delivering worker dies', () => {
  const countFile = join(tempDir('notify-crash'), 'executions.log');
  let stub: SlackStub;
  let env: Record<string, string>;
  let api: TestApp;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    stub = await SlackStub.start();
    env = testEnv('notify-crash', countFile, { SLACK_WEBHOOK_URL: stub.url });
    // The in-process app only serves the API: every job runs in the child processes.
    api = await startApp({ ...env, APP_ROLE: 'api' });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await api.close();
    await stub.close();
    await closeDb();
  });

  it('still delivers the message exactly once', async () => {
    const doomed = await startProcess(env, 'worker');
    workers.push(doomed);
    const project = await createProject(api.http);
    const requirement = `crash test ${Math.random().toString(36).slice(2)}`;
    // Planned by the requirement (in the message text) before the run exists: no race with the worker.
    stub.plan(requirement, { hold: true });
    const run = await createRun(api.http, project.id, requirement, true);
    await waitFor(() => stub.held(run.id).length === 1, 30_000, 'the worker to claim and POST the notification');

    doomed.child.kill('SIGKILL');
    await waitFor(
      () => doomed.child.exitCode !== null || doomed.child.signalCode !== null,
      10_000,
      'the worker to die',
    );
    await waitFor(() => stub.for(run.id)[0].state === 'aborted', 10_000, 'the held POST to lose its client');
    expect(stub.delivered(run.id)).toBe(0);

    workers.push(await startProcess(env, 'all'));
    await waitFor(() => stub.delivered(run.id) === 1, 30_000, 'the survivor to deliver the message');

    // Quiet: the row is SENT and no job is left that could post again.
    const queue = api.app.get<Queue>(getQueueToken(NOTIFICATIONS_QUEUE));
    await waitFor(
      async () => {
        const res = await api.http.get('/api/notifications').query({ runId: run.id }).set(auth);
        const c = await queue.getJobCounts();
        return res.body.items?.[0]?.status === 'SENT' && c.waiting + c.active + c.delayed === 0;
      },
      30_000,
      'the notification to settle',
    );
    expect(stub.for(run.id)).toHaveLength(2);
    expect(stub.delivered(run.id)).toBe(1);
    const res = await api.http.get('/api/notifications').query({ runId: run.id }).set(auth);
    // Two attempts: the one that died with its worker, and the one that got through.
    expect(res.body.items).toEqual([expect.objectContaining({ status: 'SENT', attempts: 2 })]);
  });
});
