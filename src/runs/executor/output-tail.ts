/** Keeps the last `limit` bytes of a stream without holding the whole output. */
export class OutputTail {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - this.chunks[0].length >= this.limit) {
      this.size -= this.chunks.shift()!.length;
    }
  }

  toString(): string {
    const all = Buffer.concat(this.chunks);
    const tail = all.length > this.limit ? all.subarray(all.length - this.limit) : all;
    // Drop a UTF-8 sequence cut in half at the front, and NULs Postgres text cannot hold.
    return tail
      .toString('utf8')
      .replace(/^\uFFFD+/, '')
      .replace(/\u0000/g, '');
  }
}
