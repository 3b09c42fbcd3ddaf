export interface BatcherOptions<Req> {
  /** Most requests in one batch. */
  maxSize: number;
  /** Requests with the same key never share a batch: the later one goes to a following batch. */
  key: (req: Req) => string;
  /**
   * Errors that belong to one request rather than to the batch (bad data, not a lost connection):
   * each request of the failed batch is then sent alone, so that only its own caller sees it.
   */
  isolate: (err: unknown) => boolean;
  /** Called with the size of every batch sent. */
  onBatch?: (size: number) => void;
}

interface Pending<Req, Res> {
  req: Req;
  resolve: (res: Res) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: requests submitted in the same turn of the event loop are sent as ONE call of
 * `send`, flushed on setImmediate — a lone request waits for no timer, and requests that arrive
 * together (jobs finishing in the same I/O poll) share a round trip. `send` answers one result per
 * request, in order; if it throws, every caller of that batch gets the error (unless `isolate`).
 */
export class Batcher<Req, Res> {
  private queue: Array<Pending<Req, Res>> = [];
  private scheduled = false;

  constructor(
    private readonly send: (reqs: Req[]) => Promise<Res[]>,
    private readonly o: BatcherOptions<Req>,
  ) {}

  submit(req: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.queue.length) {
      const batch: Array<Pending<Req, Res>> = [];
      const keys = new Set<string>();
      const rest: Array<Pending<Req, Res>> = [];
      for (const p of this.queue) {
        const key = this.o.key(p.req);
        if (batch.length < this.o.maxSize && !keys.has(key)) {
          keys.add(key);
          batch.push(p);
        } else rest.push(p);
      }
      this.queue = rest;
      void this.run(batch, true);
    }
  }

  private async run(batch: Array<Pending<Req, Res>>, mayIsolate: boolean): Promise<void> {
    this.o.onBatch?.(batch.length);
    let results: Res[];
    try {
      results = await this.send(batch.map((p) => p.req));
      if (results.length !== batch.length) throw new Error(`batch of ${batch.length} answered ${results.length}`);
    } catch (err) {
      if (mayIsolate && batch.length > 1 && this.o.isolate(err)) {
        await Promise.all(batch.map((p) => this.run([p], false)));
        return;
      }
      for (const p of batch) p.reject(err);
      return;
    }
    batch.forEach((p, i) => p.resolve(results[i]));
  }
}
