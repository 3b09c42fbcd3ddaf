import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

interface TcpEntry {
  localPort: number;
  remotePort: number;
  inode: string;
}

/** The kernel's table of TCP sockets (this network namespace), IPv4 and IPv6. */
function tcpTable(): TcpEntry[] {
  const out: TcpEntry[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      out.push({
        localPort: parseInt(cols[1].split(':')[1], 16),
        remotePort: parseInt(cols[2].split(':')[1], 16),
        inode: cols[9],
      });
    }
  }
  return out;
}

function socketsOf(pid: number): Set<string> {
  const out = new Set<string>();
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith('socket:[')) out.add(link.slice(8, -1));
    } catch {
      /* closed meanwhile */
    }
  }
  return out;
}

/**
 * Which process holds the client end of each TCP connection to one of our servers, asked of the
 * kernel: the client socket (local port = the peer's port, remote port = ours) is found in
 * /proc/net/tcp(6), and its inode among the open files of a process (`/proc/<pid>/fd/* ->
 * socket:[inode]`). Nothing the sender says about itself is used.
 *
 * A sender killed right after it sent its request has no socket any more when the server gets to
 * it, so the tracker also looks every `everyMs` — and right before each kill — and remembers which
 * process held which port; `owner()` asks the kernel first and that memory second.
 */
export class PeerTracker {
  private readonly seen = new Map<number, { inode: string; pid: number }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ourPort: () => number,
    private readonly candidates: () => number[],
  ) {}

  start(everyMs = 20): this {
    this.timer = setInterval(() => this.scan(), everyMs);
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The process that holds (or, last seen, held) the client end of the connection from `peerPort`. */
  owner(peerPort: number): number | undefined {
    this.scan(true);
    return this.seen.get(peerPort)?.pid;
  }

  /** Maps every client socket to our port that is not mapped yet to its process (`everyone`: not only the candidates). */
  scan(everyone = false): void {
    const ours = this.ourPort();
    const fresh = tcpTable().filter(
      (e) => e.remotePort === ours && e.inode !== '0' && this.seen.get(e.localPort)?.inode !== e.inode,
    );
    if (fresh.length === 0) return;
    const byInode = new Map(fresh.map((e) => [e.inode, e.localPort]));
    const look = (pid: number) => {
      for (const inode of socketsOf(pid)) {
        const port = byInode.get(inode);
        if (port !== undefined) {
          this.seen.set(port, { inode, pid });
          byInode.delete(inode);
        }
      }
    };
    const tried = new Set<number>();
    for (const pid of this.candidates()) {
      if (byInode.size === 0) return;
      tried.add(pid);
      look(pid);
    }
    // Not one of the expected senders: look at every process, so that a stranger is named too.
    for (const name of everyone && byInode.size ? safeReaddir('/proc') : []) {
      const pid = Number(name);
      if (Number.isInteger(pid) && pid > 0 && !tried.has(pid)) look(pid);
      if (byInode.size === 0) return;
    }
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
