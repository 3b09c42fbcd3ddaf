// Data source for the TypeORM CLI (migration:generate|run|revert).
import { DataSource } from 'typeorm';
import { configFromProcessEnv } from '../config/env';
import { dataSourceOptions } from './data-source-options';

export default new DataSource(dataSourceOptions(configFromProcessEnv().database.url, 2));
