import { Global, Module } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.module';
import { PgStatements } from './pg-statements';

/** What every repository shares beyond TypeORM: the prepared hot-path statements. */
@Global()
@Module({
  providers: [
    {
      provide: PgStatements,
      inject: [getDataSourceToken(), APP_CONFIG],
      useFactory: (ds: DataSource, config: AppConfig) =>
        new PgStatements(ds, { prepare: config.database.preparedStatements }),
    },
  ],
  exports: [PgStatements],
})
export class DatabaseModule {}
