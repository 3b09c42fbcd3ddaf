import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { RUNS_QUEUE, RunJobData } from '../src/queues/queue-names';
import { startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';

type Socket = { _write: () => void; _writev: () => void; cork: () => void; destroy: () => void };

/**
 * The app's Bull command clients hold their writes for the turn of the event loop (corkEachTurn):
 * the commands of one turn leave in one write, and a connection lost while they are held loses
 * none of them.
 */
describe("Bull's command client, one write per turn (real Redis)", () => {
  let t: TestApp;
  let queue: Queue<RunJobData>;

  beforeAll(async () => {
    t = await startApp(testEnv('queue-writes', `${tempDir('queue-writes')}/executions.log`, { APP_ROLE: 'api' }));
    queue = t.app.get(getQueueToken(RUNS_QUEUE));
    await queue.isReady();
    await queue.add({ runId: 'warm', generation: 1 }, { jobId: 'warm' }); // its scripts loaded
  });
  afterAll(() => t.close());

  const add = (ids: string[]) => Promise.all(ids.map((id) => queue.add({ runId: id, generation: 1 }, { jobId: id })));

  it('sends the adds asked for in one turn in one write, each job added once', async () => {
    const socket = queue.client.stream as unknown as Socket;
    const writes = [jest.spyOn(socket, '_write'), jest.spyOn(socket, '_writev')];
    const ids = Array.from({ length: 30 }, (_, i) => `one-write-${i}`);
    const jobs = await add(ids);
    const written = writes.reduce((n, spy) => n + spy.mock.calls.length, 0);
    for (const w of writes) w.mockRestore();
    expect(written).toBe(1);
    expect(jobs.map((j) => j.id)).toEqual(ids);
    const waiting = await queue.getWaiting();
    expect(
      waiting
        .filter((j) => String(j.id).startsWith('one-write-'))
        .map((j) => j.id)
        .sort(),
    ).toEqual([...ids].sort());
  });

  it('loses none of the held commands when the connection drops before they are written', async () => {
    const socket = queue.client.stream as unknown as Socket;
    const cork = socket.cork.bind(socket);
    let dropped = false;
    // After the turn's commands are in the held buffer and before it is written: drop the socket.
    const spy = jest.spyOn(socket, 'cork').mockImplementation(() => {
      cork();
      if (!dropped) queueMicrotask(() => ((dropped = true), socket.destroy()));
    });
    const ids = Array.from({ length: 20 }, (_, i) => `dropped-${i}`);
    const jobs = await add(ids);
    spy.mockRestore();
    expect(dropped).toBe(true);
    expect(queue.client.stream).not.toBe(socket); // a new connection carried them
    expect(jobs.map((j) => j.id)).toEqual(ids);
    const waiting = await queue.getWaiting();
    expect(waiting.filter((j) => String(j.id).startsWith('dropped-'))).toHaveLength(20);
  });
});
