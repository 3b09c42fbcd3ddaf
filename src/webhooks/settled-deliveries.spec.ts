import { SETTLED_CAPACITY, SettledDeliveries } from './settled-deliveries';
import type { WebhookDeliveriesRepository } from './webhook-deliveries.repository';

/** The in-memory side only; the fold's statement is exercised against Postgres in test/webhooks-settled. */
describe('SettledDeliveries', () => {
  const folded: Array<Map<string, { n: number; last: Date }>> = [];
  const repo = {
    addDuplicates: async (m: Map<string, { n: number; last: Date }>) => void folded.push(m),
  } as unknown as WebhookDeliveriesRepository;
  afterEach(() => jest.useRealTimers());

  it('remembers only final outcomes: a delivery in progress or failed must reach Postgres on retry', () => {
    const s = new SettledDeliveries(repo);
    for (const status of ['accepted', 'failed']) s.settle(`k-${status}`, `id-${status}`, status);
    expect(s.repeat('k-accepted')).toBeUndefined();
    expect(s.repeat('k-failed')).toBeUndefined();
    for (const status of ['processed', 'ignored', 'duplicate']) s.settle(`k-${status}`, `id-${status}`, status);
    expect(['k-processed', 'k-ignored', 'k-duplicate'].map((k) => s.repeat(k))).toEqual([
      'id-processed',
      'id-ignored',
      'id-duplicate',
    ]);
  });

  it('counts repeats per delivery and folds them in one call', async () => {
    const s = new SettledDeliveries(repo);
    s.settle('a', 'id-a', 'processed');
    s.settle('b', 'id-b', 'processed');
    s.repeat('a');
    s.repeat('a');
    s.repeat('b');
    folded.length = 0;
    await s.fold();
    expect(folded).toHaveLength(1);
    expect([...folded[0]].map(([id, c]) => [id, c.n])).toEqual([
      ['id-a', 2],
      ['id-b', 1],
    ]);
    await s.fold();
    expect(folded).toHaveLength(1); // nothing pending: no statement
  });

  it('forgets the oldest beyond its capacity, and everything after its time', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    const s = new SettledDeliveries(repo);
    for (let i = 0; i <= SETTLED_CAPACITY; i++) s.settle(`k${i}`, `id${i}`, 'processed');
    expect(s.repeat('k0')).toBeUndefined();
    expect(s.repeat('k1')).toBe('id1');
    jest.setSystemTime(1_000_000 + 61 * 60_000);
    expect(s.repeat('k2')).toBeUndefined();
  });
});
