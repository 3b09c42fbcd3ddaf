import type { Duplex } from 'node:stream';

/** What a TurnCork needs of an ioredis client; Bull's queues carry a client of another ioredis major. */
export interface CorkableClient {
  readonly status: string;
  readonly stream: Pick<Duplex, 'cork' | 'uncork'>;
}

/**
 * Commands per write at most. A turn that asks for more sends them in writes of this many, so
 * Redis starts on the first while the client is still building the next: with the whole turn in
 * one write the two took turns, each idle while the other worked (64 lock loops: ~64,000 →
 * ~145,000 acquire+release pairs/s, at less CPU per pair; docs/benchmarks.md, "Locks: writes of
 * 16, and a corked baseline"). Fewer than this per turn, the usual case in a worker, is one write.
 */
export const COMMANDS_PER_WRITE = 16;

/**
 * Holds a Redis connection's writes until the end of this turn of the event loop, so the commands
 * asked for in one turn leave in a few writes (a writev of up to COMMANDS_PER_WRITE each) instead
 * of a system call each, and Redis reads each in one read. Nothing waits for a reply, unlike
 * ioredis' auto-pipelining, which keeps one batch in flight and holds the next one back until all
 * its replies are in.
 *
 * `process.nextTick` runs after the current promise continuations have drained, so commands sent
 * from a cascade of resolved promises (a group-committed batch of runs finishing together) share
 * the writes. Off a ready connection nothing is corked: ioredis queues those commands itself.
 */
export class TurnCork {
  /** The stream held in this turn (a reconnect replaces the client's). */
  private corked: CorkableClient['stream'] | null = null;
  /** Commands held in the current write. */
  private held = 0;

  constructor(private readonly redis: CorkableClient) {}

  /** Called before each command is handed to the client. */
  hold(): void {
    if (this.redis.status !== 'ready') return;
    const stream = this.corked;
    if (stream) {
      if (++this.held <= COMMANDS_PER_WRITE) return;
      stream.uncork(); // the full write leaves now; this command starts the next one
      stream.cork();
      this.held = 1;
      return;
    }
    const held = (this.corked = this.redis.stream);
    held.cork();
    this.held = 1;
    process.nextTick(() => {
      this.corked = null;
      held.uncork();
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
