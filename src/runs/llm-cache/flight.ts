import type { IncomingHttpHeaders } from 'node:http';

export interface FlightHead {
  status: number;
  headers: IncomingHttpHeaders;
}

export interface FlightSink {
  head(h: FlightHead): void;
  chunk(c: Buffer): void;
  end(): void;
  fail(err: Error): void;
}

/**
 * One upstream answer shared by every identical request in flight: the first request's upstream
 * call feeds it, and each request that joins gets what arrived so far, then the rest as it comes —
 * streamed answers included. It keeps every chunk (a late joiner needs the start), up to
 * `maxBytes`; past that it stops taking joiners, and they make their own call.
 */
export class Flight {
  private headInfo: FlightHead | undefined;
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  private overflowed = false;
  private state: 'open' | 'ended' | 'failed' = 'open';
  private error: Error | undefined;
  private readonly sinks = new Set<FlightSink>();

  constructor(private readonly maxBytes: number) {}

  /** An ended flight stays joinable until its owner drops it: that covers the moment its answer is being stored. */
  get joinable(): boolean {
    return this.state !== 'failed' && !this.overflowed;
  }

  /** The whole answer is here: who joins now is served from memory, as from the cache. */
  get ended(): boolean {
    return this.state === 'ended';
  }

  /** Everything received, while it fits (the answer to store). */
  get body(): Buffer | undefined {
    return this.overflowed ? undefined : Buffer.concat(this.chunks, this.bytes);
  }

  get head(): FlightHead | undefined {
    return this.headInfo;
  }

  join(sink: FlightSink): void {
    if (this.headInfo) sink.head(this.headInfo);
    for (const c of this.chunks) sink.chunk(c);
    if (this.state === 'ended') return sink.end();
    if (this.state === 'failed') return sink.fail(this.error!);
    this.sinks.add(sink);
  }

  leave(sink: FlightSink): void {
    this.sinks.delete(sink);
  }

  setHead(h: FlightHead): void {
    this.headInfo = h;
    for (const s of this.sinks) s.head(h);
  }

  push(c: Buffer): void {
    if (!this.overflowed) {
      this.bytes += c.length;
      if (this.bytes > this.maxBytes) {
        this.overflowed = true;
        this.chunks.length = 0;
      } else this.chunks.push(c);
    }
    for (const s of this.sinks) s.chunk(c);
  }

  end(): void {
    this.state = 'ended';
    for (const s of this.sinks) s.end();
    this.sinks.clear();
  }

  fail(err: Error): void {
    this.state = 'failed';
    this.error = err;
    for (const s of this.sinks) s.fail(err);
    this.sinks.clear();
  }
}
