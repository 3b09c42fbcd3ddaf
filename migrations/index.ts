import { CreateCoreSchema1764400000000 } from './1764400000000-CreateCoreSchema';

// Migrations are listed explicitly (not globbed) so the app, the CLI and jest load the same set.
// Append new ones at the end, in timestamp order.
export const MIGRATIONS: Function[] = [CreateCoreSchema1764400000000];
