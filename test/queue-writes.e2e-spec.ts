import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { RUNS_QUEUE, RunJobData } from '../src/queues/queue-names';
import { startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';

type Socket = { _write: () => void; _writev: () => void; cork: () => void; destroy: () => void };

async function queueOf(role: string): Promise<{ t: TestApp; queue: Queue<RunJobData> }> {
  const t = await startApp(
    testEnv(`queue-writes-${role}`, `${tempDir('queue-writes')}/executions.log`, { APP_ROLE: role }),
  );
  const queue = t.app.get<Queue<RunJobData>>(getQueueToken(RUNS_QUEUE));
  await queue.isReady();
  await queue.pause(true); // this process takes none of the jobs the tests add
  await queue.add({ runId: 'warm', generation: 1 }, { jobId: 'warm' }); // its scripts loaded
  return { t, queue };
}

const writesDuring = async <T>(queue: Queue, work: () => Promise<T>): Promise<{ writes: number; result: T }> => {
  const socket = queue.client.stream as unknown as Socket;
  const spies = [jest.spyOn(socket, '_write'), jest.spyOn(socket, '_writev')];
  const result = await work();
  const writes = spies.reduce((n, spy) => n + spy.mock.calls.length, 0);
  for (const spy of spies) spy.mockRestore();
  return { writes, result };
};

/**
 * Where jobs are processed, the app's Bull command clients hold their writes for the turn of the
 * event loop (corkEachTurn): the commands of one turn leave in one write (a connection lost while
 * they are held: the same TurnCork's test in locks.e2e). The API's are not corked (its adds come one per request).
 */
describe("Bull's command client in a worker, one write per turn (real Redis)", () => {
  let t: TestApp;
  let queue: Queue<RunJobData>;

  beforeAll(async () => ({ t, queue } = await queueOf('worker')));
  afterAll(() => t.close());

  const add = (ids: string[]) => Promise.all(ids.map((id) => queue.add({ runId: id, generation: 1 }, { jobId: id })));

  it('sends the adds asked for in one turn in one write, each job added once', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `one-write-${i}`);
    const { writes, result: jobs } = await writesDuring(queue, () => add(ids));
    expect(writes).toBe(1);
    expect(jobs.map((j) => j.id)).toEqual(ids);
    const waiting = await queue.getWaiting();
    expect(
      waiting
        .filter((j) => String(j.id).startsWith('one-write-'))
        .map((j) => j.id)
        .sort(),
    ).toEqual([...ids].sort());
  });
});

describe("Bull's command client in the API (real Redis)", () => {
  it('writes each add at once: nothing to share a write with, and no add waits for the turn', async () => {
    const { t, queue } = await queueOf('api');
    try {
      const ids = Array.from({ length: 5 }, (_, i) => `api-add-${i}`);
      const { writes } = await writesDuring(queue, () =>
        Promise.all(ids.map((id) => queue.add({ runId: id, generation: 1 }, { jobId: id }))),
      );
      expect(writes).toBe(5);
    } finally {
      await t.close();
    }
  });
});
