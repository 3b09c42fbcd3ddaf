import { CreateCoreSchema1764400000000 } from './1764400000000-CreateCoreSchema';
import { CreateWebhookDeliveries1795972334867 } from './1795972334867-CreateWebhookDeliveries';
import { CreateRunStepsAndLlmCache1796107641659 } from './1796107641659-CreateRunStepsAndLlmCache';

// Migrations are listed explicitly (not globbed) so the app, the CLI and jest load the same set.
// Append new ones at the end, in timestamp order.
export const MIGRATIONS: Function[] = [
  CreateCoreSchema1764400000000,
  CreateWebhookDeliveries1795972334867,
  CreateRunStepsAndLlmCache1796107641659,
];
