import { getQueueToken } from '@nestjs/bull';
import type { Queue } from 'bull';
import { COMMANDS_PER_WRITE } from '../src/common/turn-cork';
import { RUNS_QUEUE, RunJobData } from '../src/queues/queue-names';
import { startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { watchWrites } from './support/socket-writes';

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

const writesDuring = async <T>(
  queue: Queue,
  work: () => Promise<T>,
  marker?: string,
): Promise<{ writes: number[]; marked: number[]; result: T }> => {
  const watch = watchWrites(queue.client.stream, marker);
  try {
    const result = await work();
    return { writes: watch.commandsPerWrite, marked: watch.markedPerWrite, result };
  } finally {
    watch.stop();
  }
};

/**
 * Where jobs are processed, the app's Bull command clients hold their writes for the turn of the
 * event loop (corkEachTurn): the commands of one turn leave in writes of COMMANDS_PER_WRITE (a
 * connection lost while they are held: the same TurnCork's test in locks.e2e). The API's are not
 * corked (its adds come one per request).
 */
describe("Bull's command client in a worker, the turn's commands in a few writes (real Redis)", () => {
  let t: TestApp;
  let queue: Queue<RunJobData>;

  beforeAll(async () => ({ t, queue } = await queueOf('worker')));
  afterAll(() => t.close());

  const add = (ids: string[]) => Promise.all(ids.map((id) => queue.add({ runId: id, generation: 1 }, { jobId: id })));

  it('sends the adds asked for in one turn in writes of at most 16, each job added once', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `one-write-${i}`);
    const { writes, marked, result: jobs } = await writesDuring(queue, () => add(ids), 'one-write-');
    // Bull's own commands (a stalled-jobs check, a delay timer) may share the turn and its writes:
    // the adds' writes are then full but for the last, with one more command among them (seen: 16, 15).
    const withAdds = writes.filter((_, i) => marked[i] > 0);
    expect(marked.reduce((a, b) => a + b, 0)).toBe(30);
    expect(Math.max(...writes)).toBeLessThanOrEqual(COMMANDS_PER_WRITE);
    expect(withAdds.slice(0, -1).every((n) => n === COMMANDS_PER_WRITE)).toBe(true);
    expect(withAdds).toHaveLength(Math.ceil(withAdds.reduce((a, b) => a + b, 0) / COMMANDS_PER_WRITE));
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
      const { writes, marked } = await writesDuring(
        queue,
        () => Promise.all(ids.map((id) => queue.add({ runId: id, generation: 1 }, { jobId: id }))),
        'api-add-',
      );
      // Each add in a write of its own (anything else the app sends meanwhile: its own writes too).
      expect(marked.filter((n) => n > 0)).toEqual([1, 1, 1, 1, 1]);
      expect(Math.max(...writes)).toBe(1);
    } finally {
      await t.close();
    }
  });
});
