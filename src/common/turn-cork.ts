import type { Duplex } from 'node:stream';

/** What a TurnCork needs of an ioredis client; Bull's queues carry a client of another ioredis major. */
export interface CorkableClient {
  readonly status: string;
  readonly stream: Pick<Duplex, 'cork' | 'uncork'>;
}

/**
 * Holds a Redis connection's writes until the end of this turn of the event loop, so the commands
 * asked for in one turn leave in ONE write (a writev of them all) instead of a system call each,
 * and Redis reads them in one read. Nothing waits for a reply, unlike ioredis' auto-pipelining,
 * which keeps one batch in flight and holds the next one back until all its replies are in.
 *
 * `process.nextTick` runs after the current promise continuations have drained, so commands sent
 * from a cascade of resolved promises (a group-committed batch of runs finishing together) share
 * the write. Off a ready connection nothing is corked: ioredis queues those commands itself.
 */
export class TurnCork {
  private corked = false;

  constructor(private readonly redis: CorkableClient) {}

  hold(): void {
    if (this.corked || this.redis.status !== 'ready') return;
    const stream = this.redis.stream;
    stream.cork();
    this.corked = true;
    process.nextTick(() => {
      this.corked = false;
      stream.uncork();
    });
  }
}

/**
 * A TurnCork on every command of a client whose commands are sent by code that is not ours (Bull's
 * queue client): its `sendCommand`, through which every command and script of ioredis goes, holds
 * the turn's writes first. Not for a connection that blocks (BRPOPLPUSH) or subscribes.
 */
export function corkEachTurn<C extends CorkableClient & { sendCommand(...args: never[]): unknown }>(redis: C): void {
  const cork = new TurnCork(redis);
  const send = redis.sendCommand.bind(redis) as (...args: unknown[]) => unknown;
  redis.sendCommand = ((...args: unknown[]) => {
    cork.hold();
    return send(...args);
  }) as C['sendCommand'];
}
