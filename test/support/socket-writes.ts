import type { Duplex } from 'node:stream';

type Chunk = string | Buffer;
type Socket = {
  _write: (chunk: Chunk, encoding: string, cb: () => void) => void;
  _writev: (chunks: Array<{ chunk: Chunk }>, cb: () => void) => void;
};

/** A RESP command starts with `*<argc>\r\n$`: at the start of a write or after the previous command. */
const COMMAND_START = /(?:^|\r\n)\*\d+\r\n\$/g;

/** The commands of one write, each from its `*<argc>` to the next command's. */
function commandsOf(data: string): string[] {
  const starts = [...data.matchAll(COMMAND_START)].map((m) => (m.index === 0 ? 0 : m.index + 2));
  return starts.map((start, i) => data.slice(start, starts[i + 1] ?? data.length));
}

/**
 * Watches a Redis connection's socket: the number of commands in each system-call-level write
 * (`_write` / `_writev`), in order, until `stop()`. Counted from the bytes, not from our code.
 * With `marker`, also how many of each write's commands carry it (`markedPerWrite`): a test's own
 * commands told apart from what the app sends on the same connection meanwhile.
 */
export function watchWrites(
  stream: Pick<Duplex, 'write'>,
  marker?: string,
): { commandsPerWrite: number[]; markedPerWrite: number[]; stop: () => void } {
  const socket = stream as unknown as Socket;
  const commandsPerWrite: number[] = [];
  const markedPerWrite: number[] = [];
  const count = (data: string) => {
    const commands = commandsOf(data);
    commandsPerWrite.push(commands.length);
    markedPerWrite.push(marker === undefined ? 0 : commands.filter((c) => c.includes(marker)).length);
  };
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
    markedPerWrite,
    stop: () => {
      delete (socket as Partial<Socket>)._write;
      delete (socket as Partial<Socket>)._writev;
    },
  };
}
