import { DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations';
import { ENTITIES } from './entities';
import { GuardedPgClient } from './guarded-pg-client';

export function dataSourceOptions(databaseUrl: string, poolSize = 20): DataSourceOptions {
  return {
    type: 'postgres',
    url: databaseUrl,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'migrations',
    // Schema changes only through migrations (applied at start under an advisory lock).
    synchronize: false,
    migrationsRun: false,
    uuidExtension: 'pgcrypto',
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 5000,
      application_name: 'onceflow',
      // pg-pool builds its clients from this class: see GuardedPgClient for the crash it prevents.
      Client: GuardedPgClient,
    },
  };
}
