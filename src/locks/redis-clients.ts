import Redis from 'ioredis';

/**
 * The app's Redis client (locks, guards, the webhook spool, health). Auto-pipelining: commands
 * issued in one tick go out in one write.
 */
export function newRedisClient(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 3, enableAutoPipelining: true });
}

/**
 * Connections the lock service spreads its keys over. ioredis keeps ONE auto-pipeline batch in
 * flight per connection and queues the rest until every reply is in, so on one connection the
 * client's work and Redis' script time take turns; on two, one batch runs in Redis while the
 * client handles the other's replies (docs/benchmarks.md, "Locks": 0.64× raw on one, 0.85× on
 * two, raw itself measured on two as well). More than two bought nothing on two cores.
 */
export const LOCK_CONNECTIONS = 2;

/**
 * The connection every command about `key` goes through. Pinning a key to one connection keeps
 * Redis' FIFO order per key: an extend still in flight when the holder releases lands before the
 * release, as it did on one connection (on two, a late extend-or-retake could set the key again).
 */
export function clientFor<T>(clients: readonly T[], key: string): T {
  if (clients.length === 1) return clients[0];
  // FNV-1a: cheap, and spreads keys that differ only in their last characters.
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return clients[(h >>> 0) % clients.length];
}
