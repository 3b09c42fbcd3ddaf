// The `onceflow` command a run's command finds first on its PATH: steps that run once per run,
// and values kept across attempts. It talks only to its own worker (ONCEFLOW_URL) with the
// attempt's credential (ONCEFLOW_RUN_TOKEN). Node built-ins only: it starts on every step call.
// A program of its own (copied onto the command's PATH, run by the command), not part of the
// service: its environment is the command's, so it reads process.env itself, not src/config.
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { constants } from 'node:os';
import {
  EXIT,
  EXIT_CODE_HEADER,
  MAX_RECORDED_BYTES,
  STEP_NAME_PATTERN,
  STEP_STATE_HEADER,
} from '../worker-api.protocol';

const USAGE = `usage: onceflow step NAME -- CMD [ARG...]   run CMD unless step NAME is done for this run
       onceflow get KEY                       print the value stored under KEY (exit 1: none)
       onceflow put KEY                       store standard input (at most 1 MiB) under KEY
NAME and KEY: 1-128 characters of [A-Za-z0-9._:-]`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

class Exit extends Error {
  constructor(
    readonly code: number,
    message?: string,
  ) {
    super(message ?? '');
  }
}

const say = (msg: string) => process.stderr.write(`onceflow: ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function worker(): { url: URL; token: string } {
  const base = process.env.ONCEFLOW_URL;
  const token = process.env.ONCEFLOW_RUN_TOKEN;
  if (!base || !token)
    throw new Exit(EXIT.usage, 'not inside an onceflow run (ONCEFLOW_URL and ONCEFLOW_RUN_TOKEN are unset)');
  return { url: new URL(base), token };
}

function once(method: string, path: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const { url, token } = worker();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { ...headers, authorization: `Bearer ${token}`, 'content-length': body?.length ?? 0 },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.once('error', reject);
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error('no answer from the worker for 60 s')));
    req.once('error', reject);
    req.end(body);
  });
}

/**
 * One call to the worker. Every call is idempotent (start, finish, get, put), so a connection
 * error or a 503 (the worker lost its database for a moment) is tried again for a few seconds;
 * then the attempt gives up with 75 and onceflow retries it.
 */
async function call(method: string, path: string, body?: Buffer, headers?: Record<string, string>): Promise<Answer> {
  let last = '';
  for (const delay of [0, 100, 300, 700, 1500]) {
    if (delay) await sleep(delay);
    try {
      const a = await once(method, path, body, headers);
      if (a.status !== 503) return refuseFenced(a);
      last = message(a);
    } catch (err) {
      if (err instanceof Exit) throw err;
      last = (err as Error).message;
    }
  }
  throw new Exit(EXIT.unreachable, `the worker cannot be reached (${last}); the attempt will be retried`);
}

function message(a: Answer): string {
  try {
    return (
      (JSON.parse(a.body.toString('utf8')) as { error?: { message?: string } }).error?.message ?? `HTTP ${a.status}`
    );
  } catch {
    return `HTTP ${a.status}`;
  }
}

function refuseFenced(a: Answer): Answer {
  if (a.status === 401 || a.status === 403 || a.status === 409)
    throw new Exit(EXIT.fenced, message(a).replace(/^onceflow: /, ''));
  if (a.status >= 400 && a.status !== 404) throw new Exit(EXIT.usage, message(a).replace(/^onceflow: /, ''));
  return a;
}

function checkName(kind: string, name: string | undefined): string {
  if (!name || !STEP_NAME_PATTERN.test(name))
    throw new Exit(EXIT.usage, `${kind} must be 1-128 characters of [A-Za-z0-9._:-]\n${USAGE}`);
  return name;
}

function write(buf: Buffer): Promise<void> {
  return new Promise((resolve) => (buf.length ? process.stdout.write(buf, () => resolve()) : resolve()));
}

async function step(args: string[]): Promise<number> {
  const name = checkName('NAME', args[0]);
  if (args[1] !== '--' || args.length < 3) throw new Exit(EXIT.usage, USAGE);
  const [cmd, ...cmdArgs] = args.slice(2);
  const path = `/v1/steps/${name}`;
  const begun = await call('POST', `${path}/start`);
  if (begun.headers[STEP_STATE_HEADER] === 'done') {
    await write(begun.body);
    return EXIT.ok;
  }
  const { code, output } = await runCommand(name, cmd, cmdArgs);
  await call('POST', `${path}/finish`, output, { [EXIT_CODE_HEADER]: String(code) });
  return code;
}

/** Runs the step's command: stdin and stderr pass through, stdout passes through and its first 1 MiB is kept. */
function runCommand(name: string, cmd: string, args: string[]): Promise<{ code: number; output: Buffer }> {
  return new Promise((resolve) => {
    const kept: Buffer[] = [];
    let keptBytes = 0;
    const child = spawn(cmd, args, {
      stdio: ['inherit', 'pipe', 'inherit'],
      env: { ...process.env, ONCEFLOW_STEP: name, ONCEFLOW_STEP_KEY: `${process.env.RUN_ID ?? ''}:${name}` },
    });
    const forward = (sig: NodeJS.Signals) => process.on(sig, () => child.kill(sig));
    (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).forEach(forward);
    child.stdout!.on('data', (c: Buffer) => {
      if (keptBytes < MAX_RECORDED_BYTES) {
        const part = c.subarray(0, MAX_RECORDED_BYTES - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
      if (!process.stdout.write(c)) {
        child.stdout!.pause();
        process.stdout.once('drain', () => child.stdout!.resume());
      }
    });
    let failed: number | undefined;
    child.once('error', (err: NodeJS.ErrnoException) => {
      say(`cannot run ${cmd}: ${err.message}`);
      failed = err.code === 'ENOENT' ? 127 : 126;
    });
    child.once('close', (code, signal) => {
      const exit = failed ?? code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
      resolve({ code: exit, output: Buffer.concat(kept, keptBytes) });
    });
  });
}

async function get(args: string[]): Promise<number> {
  const key = checkName('KEY', args[0]);
  const a = await call('GET', `/v1/values/${key}`);
  if (a.status === 404) return EXIT.missing;
  await write(a.body);
  return EXIT.ok;
}

async function put(args: string[]): Promise<number> {
  const key = checkName('KEY', args[0]);
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of process.stdin) {
    n += (c as Buffer).length;
    if (n > MAX_RECORDED_BYTES) throw new Exit(EXIT.usage, `a value is at most ${MAX_RECORDED_BYTES} bytes`);
    chunks.push(c as Buffer);
  }
  await call('PUT', `/v1/values/${key}`, Buffer.concat(chunks, n));
  return EXIT.ok;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === 'step') return step(args);
  if (command === 'get') return get(args);
  if (command === 'put') return put(args);
  throw new Exit(EXIT.usage, USAGE);
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    if (err instanceof Exit) {
      if (err.message) say(err.message);
      process.exitCode = err.code;
    } else {
      say(`unexpected error: ${(err as Error)?.message ?? String(err)}`);
      process.exitCode = EXIT.unreachable;
    }
  },
);
