import { checkServices, ServiceUnreachableError } from './common/preflight';
import { ConfigError } from './config/app-config';
import { roleRunsWorkers } from './config/roles';
import { configFromProcessEnv, DEV_ADMIN_FILE, DEV_KEY_FILE } from './config/env';
import { createApp, listen } from './bootstrap';
import { prepareDatabase } from './database/prepare-database';
import { resolveRunIdentity } from './runs/executor/run-identity';

async function main(): Promise<void> {
  const config = configFromProcessEnv();
  // A worker that cannot run commands safely says so in one line, before anything starts.
  if (roleRunsWorkers(config.role) && config.runs.executor === 'shell') resolveRunIdentity(config.runs.runAsUser);
  await checkServices(config);
  await prepareDatabase(config.database.url);
  const app = await createApp(config);
  await listen(app, config.port);
  // Names the files, never their content.
  const notes = [
    config.auth.apiKeysGenerated ? `API_KEYS unset: a development key is in ${DEV_KEY_FILE}` : '',
    config.auth.adminCredentialsGenerated
      ? `ADMIN_USER/ADMIN_PASSWORD unset: /admin/queues credentials (user:password) are in ${DEV_ADMIN_FILE}`
      : '',
  ].filter(Boolean);
  const note = notes.length ? ` (${notes.join('; ')})` : '';
  process.stdout.write(`onceflow ${config.role} listening on :${config.port}${note}\n`);
}

main().catch((err: unknown) => {
  // Expected start-up failures get one clear line, not a stack trace.
  if (err instanceof ConfigError || err instanceof ServiceUnreachableError) {
    process.stderr.write(`onceflow: ${err.message}\n`);
  } else {
    process.stderr.write(
      `onceflow: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
  }
  process.exit(1);
});
