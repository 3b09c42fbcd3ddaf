/**
 * The intake's CPU by kind of request: after the closed loop (so the API process is warm), the
 * same process gets one kind at a time at the same concurrency — new items only, byte-identical
 * retries only, and the trivial route the ceiling is measured on. The mix's figure alone cannot
 * say whether the HTTP stack, the retry path or the new items' durable writes hold its CPU; these
 * three can (docs/benchmarks.md, "The intake request by request").
 */
import { closedLoop } from './intake-http';
import { cpuMs, serviceCpu } from './support';

export interface KindCost {
  /** Requests answered per second while only this kind was sent. */
  perSec: number;
  /** CPU µs per request: the API process, the Postgres backends of its database, this (client) process. */
  apiUs: number | null;
  postgresUs: number | null;
  clientUs: number;
  /** The whole machine's busy CPU µs per request (every process and the kernel), and its busy share. */
  machineUs: number | null;
  busyShare: number | null;
}

export interface IntakeByKind {
  secondsEach: number;
  newItems: KindCost;
  retries: KindCost;
  trivialRoute: KindCost;
}

export interface ByKindSetup {
  concurrency: number;
  secondsEach: number;
  apiPid: number | undefined;
  databaseUrl: string;
  redisUrl: string;
  /** Sends one new item (a body never sent before), one byte-identical retry, one trivial GET. */
  newItem: () => Promise<unknown>;
  retry: () => Promise<unknown>;
  trivial: () => Promise<unknown>;
}

async function oneKind(s: ByKindSetup, send: () => Promise<unknown>): Promise<KindCost> {
  const services = await serviceCpu(s.databaseUrl, s.redisUrl);
  const api0 = cpuMs(s.apiPid);
  const client0 = process.cpuUsage();
  const { answered: n, seconds, machine } = await closedLoop(s.concurrency, send, s.secondsEach * 1000);
  const api1 = cpuMs(s.apiPid);
  const client = process.cpuUsage(client0);
  const { postgresMs } = await services();
  const us = (ms: number | null) => (ms === null || n === 0 ? null : (ms * 1000) / n);
  return {
    perSec: n / seconds,
    apiUs: us(api0 === null || api1 === null ? null : api1 - api0),
    postgresUs: us(postgresMs),
    clientUs: (client.user + client.system) / Math.max(n, 1),
    machineUs: us(machine ? machine.busyMs : null),
    busyShare: machine ? machine.busyShare : null,
  };
}

export async function measureIntakeByKind(s: ByKindSetup): Promise<IntakeByKind> {
  return {
    secondsEach: s.secondsEach,
    newItems: await oneKind(s, s.newItem),
    retries: await oneKind(s, s.retry),
    trivialRoute: await oneKind(s, s.trivial),
  };
}

export function formatByKind(b: IntakeByKind): string {
  const us = (v: number | null) => (v === null ? '?' : v.toFixed(0));
  const row = (label: string, k: KindCost) =>
    `  ${label.padEnd(22)} ${k.perSec.toFixed(0).padStart(6)}/s  CPU µs per request: API ${us(k.apiUs)}, Postgres ${us(k.postgresUs)}, client ${us(k.clientUs)}, machine ${us(k.machineUs)} (busy ${k.busyShare === null ? '?' : (k.busyShare * 100).toFixed(0)} %)`;
  return [
    `one kind at a time (${b.secondsEach} s each, same process, same concurrency):`,
    row('new items only', b.newItems),
    row('byte-identical retries', b.retries),
    row('GET /health/live', b.trivialRoute),
  ].join('\n');
}

/** Whole µs and requests/s, for latest.json. */
export function roundedByKind(b: IntakeByKind): Record<'newItems' | 'retries' | 'trivialRoute', KindCost> {
  const n = (v: number | null) => (v === null ? null : Math.round(v));
  const kind = (k: KindCost): KindCost => ({
    perSec: Math.round(k.perSec),
    apiUs: n(k.apiUs),
    postgresUs: n(k.postgresUs),
    clientUs: Math.round(k.clientUs),
    machineUs: n(k.machineUs),
    busyShare: k.busyShare === null ? null : Math.round(k.busyShare * 1000) / 1000,
  });
  return { newItems: kind(b.newItems), retries: kind(b.retries), trivialRoute: kind(b.trivialRoute) };
}
