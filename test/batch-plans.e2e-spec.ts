import { join } from 'node:path';
import { escapeLiteral } from 'pg';
import { Statement } from '../src/database/named-params';
import { PgStatements } from '../src/database/pg-statements';
import { DispatchRepository } from '../src/runs/dispatch.repository';
import { RunStatus } from '../src/runs/run-status';
import { RunClaimRepository } from '../src/runs/worker/run-claim.repository';
import { RunWorkerRepository } from '../src/runs/worker/run-worker.repository';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv, uniquePrefix } from './support/env';
import { insertProject, insertRun } from './support/run-rows';

// pg's own serialisation of a bound value (arrays as '{…}'), so that a literal means what a
// bound parameter would.
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (v: unknown) => unknown };

interface PlanNode {
  'Index Name'?: string;
  'Relation Name'?: string;
  'Node Type': string;
  'Parent Relationship'?: string;
  Plans?: PlanNode[];
}

/**
 * The indexes the plan reads, but not those of correlated subplans: the claim's count of a
 * project's live leases is one, and reading the status index there (RUNNING runs by lease expiry)
 * is a fair choice — it is not a lookup of the batch's own runs.
 */
function indexesOf(node: PlanNode, out: string[] = []): string[] {
  if (node['Index Name']) out.push(node['Index Name']);
  for (const child of node.Plans ?? []) if (child['Parent Relationship'] !== 'SubPlan') indexesOf(child, out);
  return out;
}

type PlanMode = 'force_custom_plan' | 'force_generic_plan';

/**
 * The indexes of a prepared statement's plan: the custom plan Postgres makes for the values of its
 * first executions, or the generic plan it keeps once it stops re-planning.
 */
async function planIndexes(mode: PlanMode, text: string, values: unknown[]): Promise<string[]> {
  const client = await db().connect();
  try {
    await client.query(`SET plan_cache_mode = ${mode}`);
    await client.query(`PREPARE plan_probe AS ${text}`);
    const args = values.map((v) => (v === null || v === undefined ? 'NULL' : escapeLiteral(String(prepareValue(v)))));
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE plan_probe(${args.join(', ')})`);
    return indexesOf((rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0].Plan);
  } finally {
    await client.query('DEALLOCATE ALL').catch(() => undefined);
    await client.query('RESET plan_cache_mode').catch(() => undefined);
    client.release();
  }
}

/**
 * The batch statements look each of their runs up by primary key. Left to itself, the planner
 * preferred the status index when its statistics said few runs are PENDING or RUNNING — and that
 * index holds an entry for every run that passed through the status since the last vacuum, all
 * of which each batch then walked.
 */
describe('batch statements: runs looked up by primary key, never through the status index', () => {
  let t: TestApp;
  let project: { id: string };
  /** The statements the first call of `act` sends (prepared, or in one round trip), not run. */
  const capture = async (act: () => Promise<unknown>): Promise<Statement[]> => {
    const statements = t.app.get(PgStatements);
    let seen: Statement[] | undefined;
    const { preparedRows, inOneRoundTrip } = statements;
    statements.preparedRows = async <R>(text: string, values: unknown[]): Promise<R[]> => {
      seen ??= [{ text, values }];
      return [];
    };
    statements.inOneRoundTrip = async <R>(batch: Statement[]): Promise<R[]> => {
      seen ??= batch;
      return [];
    };
    try {
      await act();
    } finally {
      Object.assign(statements, { preparedRows, inOneRoundTrip });
    }
    return seen!;
  };

  beforeAll(async () => {
    t = await startApp(
      testEnv('plans', join(tempDir('plans'), 'executions.log'), {
        APP_ROLE: 'worker',
        REDIS_PREFIX: uniquePrefix('plans'),
      }),
    );
    project = await insertProject(100);
    // A history of finished runs, analysed: the statistics then say PENDING and RUNNING are rare.
    await db().query(
      `INSERT INTO runs (project_id, requirement, status) SELECT $1, 'finished', 'SUCCESS' FROM generate_series(1, 3000)`,
      [project.id],
    );
    await db().query('ANALYZE runs');
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const modes: PlanMode[] = ['force_custom_plan', 'force_generic_plan'];

  it.each(modes)('the bulk dispatch (%s)', async (mode) => {
    const ids = await Promise.all(Array.from({ length: 11 }, () => insertRun(project.id)));
    const [{ text, values }] = await capture(() => t.app.get(DispatchRepository).queuePending(ids, 'w', 'dispatched'));
    const indexes = await planIndexes(mode, text, values);
    expect(indexes).toContain('pk_runs');
    expect(indexes).not.toContain('ix_runs_status_lease');
  });

  it.each(modes)('the finalize (%s)', async (mode) => {
    const ids = await Promise.all(
      Array.from({ length: 11 }, () => insertRun(project.id, { status: 'RUNNING', fencing_token: 3, leaseMs: 60_000 })),
    );
    const [{ text, values }] = await capture(() =>
      t.app.get(RunWorkerRepository).finalizeMany(
        ids.map((runId) => ({
          runId,
          to: RunStatus.SUCCESS as const,
          fencingToken: '3',
          outputTail: '',
          lastError: null,
          reason: 'done',
          workerId: 'w',
          outbox: { eventType: 'run.succeeded' as const, message: JSON.stringify({ text: 'done' }) },
        })),
      ),
    );
    const indexes = await planIndexes(mode, text, values);
    expect(indexes).toContain('pk_runs');
    expect(indexes).not.toContain('ix_runs_status_lease');
  });

  it.each(modes)('the claim (%s)', async (mode) => {
    const ids = await Promise.all(Array.from({ length: 11 }, () => insertRun(project.id, { status: 'QUEUED' })));
    const sent = await capture(() =>
      t.app
        .get(RunClaimRepository)
        .claimMany(ids.map((runId) => ({ runId, redisToken: 1, owner: 'o', leaseMs: 60_000, workerId: 'w' }))),
    );
    for (const { text, values } of sent) {
      const indexes = await planIndexes(mode, text, values);
      expect(indexes).not.toContain('ix_runs_status_lease');
    }
  });
});
