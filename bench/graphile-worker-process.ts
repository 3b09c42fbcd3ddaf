/**
 * The peer's consumer, a child process of bench.ts: graphile-worker 0.18 with the guarded phase's
 * concurrency, in its own schema of the scratch database. Its task's side effect is counted here,
 * per job (the number in its payload), not read from graphile-worker's bookkeeping: a job run
 * twice counts twice. Reports counts to the parent over IPC.
 *
 * Environment (set by graphile-worker.ts): GW_DATABASE_URL, GW_SCHEMA, GW_CONCURRENCY.
 */
const executions = new Map<number, number>();
let total = 0;
let lastAt = 0;

const send = (msg: object) => {
  if (process.connected) process.send?.(msg, undefined, {}, () => undefined);
};

async function main(): Promise<void> {
  // ES module only: loaded with import(), which the CommonJS build keeps as it is.
  const gw = await import('graphile-worker');
  const options = {
    connectionString: process.env.GW_DATABASE_URL,
    schema: process.env.GW_SCHEMA,
    concurrency: Number(process.env.GW_CONCURRENCY ?? 32),
    // A pool as large as the concurrency: a job never waits for a connection.
    maxPoolSize: Number(process.env.GW_CONCURRENCY ?? 32) + 2,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new gw.Logger(() => () => undefined),
  };
  await gw.runMigrations(options);
  const runner = await gw.run({
    ...options,
    taskList: {
      bench: async (payload) => {
        const n = (payload as { n: number }).n;
        executions.set(n, (executions.get(n) ?? 0) + 1);
        total++;
        lastAt = Date.now();
      },
    },
  });
  const report = setInterval(() => send({ distinct: executions.size, total, lastAt }), 20);
  send({ ready: true });
  process.on('disconnect', () => {
    clearInterval(report);
    void runner.stop().finally(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`graphile-worker consumer: ${String(err)}\n`);
  process.exit(1);
});
