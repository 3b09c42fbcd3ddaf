import { Batcher } from './batcher';

describe('Batcher', () => {
  function make(send: (reqs: string[]) => Promise<string[]>, maxSize = 3) {
    const sent: string[][] = [];
    const batcher = new Batcher<string, string>(
      (reqs) => {
        sent.push(reqs);
        return send(reqs);
      },
      { maxSize, key: (r) => r.split('#')[0], isolate: (err) => String(err).includes('bad') },
    );
    return { batcher, sent };
  }
  const echo = async (reqs: string[]) => reqs.map((r) => `done ${r}`);

  it('sends the requests of one turn together, each caller getting its own answer', async () => {
    const { batcher, sent } = make(echo);
    expect(await Promise.all(['a', 'b'].map((r) => batcher.submit(r)))).toEqual(['done a', 'done b']);
    expect(sent).toEqual([['a', 'b']]);
    expect(await batcher.submit('c')).toBe('done c');
    expect(sent).toEqual([['a', 'b'], ['c']]);
  });

  it('splits at the cap, and never puts two requests with one key in a batch', async () => {
    const { batcher, sent } = make(echo);
    await Promise.all(['a', 'a#2', 'b', 'c', 'd', 'a#3'].map((r) => batcher.submit(r)));
    expect(sent).toEqual([['a', 'b', 'c'], ['a#2', 'd'], ['a#3']]);
  });

  it('fails every caller of a batch with its error', async () => {
    const { batcher, sent } = make(async () => Promise.reject(new Error('connection lost')));
    const results = await Promise.allSettled(['a', 'b'].map((r) => batcher.submit(r)));
    expect(results.map((r) => r.status === 'rejected' && String(r.reason))).toEqual([
      'Error: connection lost',
      'Error: connection lost',
    ]);
    expect(sent).toHaveLength(1);
  });

  it('an error of one request (isolate) is sent again alone: only its caller fails', async () => {
    const { batcher, sent } = make(async (reqs) => {
      if (reqs.includes('x')) throw new Error('bad x');
      return reqs.map((r) => `done ${r}`);
    });
    const results = await Promise.allSettled(['a', 'x', 'b'].map((r) => batcher.submit(r)));
    expect(results).toEqual([
      { status: 'fulfilled', value: 'done a' },
      { status: 'rejected', reason: new Error('bad x') },
      { status: 'fulfilled', value: 'done b' },
    ]);
    expect(sent).toEqual([['a', 'x', 'b'], ['a'], ['x'], ['b']]);
  });

  it('an answer of the wrong length fails the batch', async () => {
    const { batcher } = make(async () => ['only one']);
    await expect(Promise.all(['a', 'b'].map((r) => batcher.submit(r)))).rejects.toThrow('batch of 2 answered 1');
  });
});
