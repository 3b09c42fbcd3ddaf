import { Logger } from '@nestjs/common';
import { Client, ClientConfig } from 'pg';

const log = new Logger('Postgres');

/**
 * A pg Client that always has an 'error' listener.
 *
 * pg-pool removes its idle listener the moment it hands a client out, and TypeORM adds its own
 * only in a promise continuation. When the server's FATAL (e.g. 57P01 from pg_terminate_backend,
 * a failover, an idle-session timeout) arrives in the same TCP chunk as the ReadyForQuery that
 * completed the hand-out, the client emits 'error' in between with no listener, and Node turns
 * that into an uncaught exception: the whole worker dies (test/pg-client-guard.e2e-spec.ts makes it
 * happen deterministically).
 *
 * The listener does not need to act: the client is already marked unusable, the pool or TypeORM
 * discards it on release, and the next statement on it fails with a connection error that our
 * callers treat as transient (isTransientDbError) and retry on a fresh connection.
 */
export class GuardedPgClient extends Client {
  constructor(config?: string | ClientConfig) {
    super(config);
    // A FATAL (or PANIC) ends the session, but its socket closes a moment later, and pg-pool
    // only discards a released client that pg already marked unusable: one released in between
    // went back to the pool, and the next caller's statement died on it ("Connection terminated
    // unexpectedly"; test/pg-client-guard.e2e-spec.ts). Marked as the FATAL is read, before pg
    // hands the error to the statement, it is discarded on release. `_queryable` is the flag pg
    // itself sets on a socket error and pg-pool reads on release.
    const connection = (this as unknown as { connection: NodeJS.EventEmitter }).connection;
    connection.prependListener('errorMessage', (msg: { severity?: string }) => {
      if (msg.severity === 'FATAL' || msg.severity === 'PANIC')
        (this as unknown as { _queryable: boolean })._queryable = false;
    });
    this.on('error', (err: Error & { code?: string }) => {
      log.debug(`connection lost (${err.code ?? err.message}); it will be discarded`);
    });
  }
}
