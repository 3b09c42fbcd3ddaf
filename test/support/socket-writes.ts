import type { Duplex } from 'node:stream';

type Chunk = string | Buffer;
type Socket = {
  _write: (chunk: Chunk, encoding: string, cb: () => void) => void;
  _writev: (chunks: Array<{ chunk: Chunk }>, cb: () => void) => void;
};

/** A RESP command starts with `*<argc>\r\n$`: at the start of a write or after the previous command. */
const COMMAND_START = /(?:^|\r\n)\*\d+\r\n\$/g;

/**
 * Watches a Redis connection's socket: the number of commands in each system-call-level write
 * (`_write` / `_writev`), in order, until `stop()`. Counted from the bytes, not from our code.
 */
export function watchWrites(stream: Pick<Duplex, 'write'>): { commandsPerWrite: number[]; stop: () => void } {
  const socket = stream as unknown as Socket;
  const commandsPerWrite: number[] = [];
  const count = (data: string) => commandsPerWrite.push(data.match(COMMAND_START)?.length ?? 0);
  // The socket's own methods come from its prototype: shadowed here, and unshadowed by stop().
  const write = socket._write;
  const writev = socket._writev;
  socket._write = function (chunk, encoding, cb) {
    count(chunk.toString());
    return write.call(this, chunk, encoding, cb);
  };
  socket._writev = function (chunks, cb) {
    count(chunks.map((c) => c.chunk.toString()).join(''));
    return writev.call(this, chunks, cb);
  };
  return {
    commandsPerWrite,
    stop: () => {
      delete (socket as Partial<Socket>)._write;
      delete (socket as Partial<Socket>)._writev;
    },
  };
}
