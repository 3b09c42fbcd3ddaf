import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { queryRows } from '../../database/query-rows';
import { StepStatus } from './run-step.entity';

/** Who is asking: the attempt that (believes it) holds the run. */
export interface AttemptRef {
  runId: string;
  fencingToken: string;
  attempt: number;
}

export type StepBegin = { kind: 'fenced' } | { kind: 'replay'; output: Buffer } | { kind: 'run' };
export type StepFinish = { kind: 'fenced' } | { kind: 'recorded'; status: StepStatus } | { kind: 'already_done' };
export type ValueRead = { kind: 'fenced' } | { kind: 'missing' } | { kind: 'found'; value: Buffer };

export interface StepRow {
  name: string;
  status: StepStatus;
  attempt: number;
  fencing_token: string;
  exit_code: number | null;
  output_bytes: number;
  started_at: Date;
  finished_at: Date | null;
}

/**
 * The run's own lock, shared: an attempt may write only while the run is RUNNING under its
 * fencing token, and FOR SHARE makes a claim that would bump the token wait for our statement to
 * commit (and our statement re-check the row if the claim committed first). So a step is never
 * recorded by an attempt that had already been taken over, cancelled or finished.
 */
const HELD = `SELECT id FROM runs WHERE id = $1 AND fencing_token = $2::bigint AND status = 'RUNNING' FOR SHARE`;

/**
 * The step journal and the run's values. Every write is ONE conditional statement: it happens
 * only for the attempt holding the run's current fencing token, and a DONE step never changes.
 */
@Injectable()
export class StepJournalRepository {
  constructor(@InjectDataSource() private readonly ds: DataSource) {}

  /** A DONE step is replayed; otherwise it is (re)started by this attempt. */
  async begin(a: AttemptRef, name: string): Promise<StepBegin> {
    const rows = await queryRows<{ held: number; prior_status: StepStatus | null; output: Buffer | null }>(
      this.ds,
      `WITH run AS (${HELD}),
       prior AS (SELECT s.status, s.output FROM run_steps s JOIN run ON s.run_id = run.id WHERE s.name = $3),
       started AS (
         INSERT INTO run_steps (run_id, name, status, attempt, fencing_token, started_at)
         SELECT id, $3, 'STARTED', $4, $2::bigint, now() FROM run
         ON CONFLICT ON CONSTRAINT uq_run_steps_run_name DO UPDATE
           SET status = 'STARTED', attempt = EXCLUDED.attempt, fencing_token = EXCLUDED.fencing_token,
               started_at = now(), finished_at = NULL, starts = run_steps.starts + 1
           WHERE run_steps.status <> 'DONE'
         RETURNING id
       )
       SELECT (SELECT count(*) FROM run)::int AS held, (SELECT status FROM prior) AS prior_status,
              (SELECT output FROM prior) AS output, (SELECT count(*) FROM started)::int AS started`,
      [a.runId, a.fencingToken, name, a.attempt],
    );
    const r = rows[0];
    if (!r || r.held === 0) return { kind: 'fenced' };
    if (r.prior_status === StepStatus.DONE) return { kind: 'replay', output: r.output ?? Buffer.alloc(0) };
    return { kind: 'run' };
  }

  /** Exit 0 records the step DONE with its output; any other exit keeps it STARTED with that exit code. */
  async finish(a: AttemptRef, name: string, exitCode: number, output: Buffer): Promise<StepFinish> {
    const done = exitCode === 0;
    const rows = await queryRows<{ held: number; status: StepStatus | null; current: StepStatus | null }>(
      this.ds,
      `WITH run AS (${HELD}),
       upd AS (
         UPDATE run_steps s SET status = $4, exit_code = $5, output = $6, output_bytes = $7, finished_at = now()
           FROM run
          WHERE s.run_id = run.id AND s.name = $3 AND s.status = 'STARTED' AND s.fencing_token = $2::bigint
         RETURNING s.status
       )
       SELECT (SELECT count(*) FROM run)::int AS held, (SELECT status FROM upd) AS status,
              (SELECT status FROM run_steps WHERE run_id = $1 AND name = $3) AS current`,
      [
        a.runId,
        a.fencingToken,
        name,
        done ? StepStatus.DONE : StepStatus.STARTED,
        exitCode,
        done ? output : null,
        done ? output.length : 0,
      ],
    );
    const r = rows[0];
    if (!r || r.held === 0) return { kind: 'fenced' };
    if (r.status) return { kind: 'recorded', status: r.status };
    // Held, but the step was not ours to finish: a concurrent call of the same step recorded it.
    if (r.current === StepStatus.DONE) return { kind: 'already_done' };
    return { kind: 'fenced' };
  }

  async getValue(a: AttemptRef, key: string): Promise<ValueRead> {
    const rows = await queryRows<{ held: number; value: Buffer | null }>(
      this.ds,
      `WITH run AS (${HELD})
       SELECT (SELECT count(*) FROM run)::int AS held,
              (SELECT v.value FROM run_values v JOIN run ON v.run_id = run.id WHERE v.key = $3) AS value`,
      [a.runId, a.fencingToken, key],
    );
    const r = rows[0];
    if (!r || r.held === 0) return { kind: 'fenced' };
    return r.value === null ? { kind: 'missing' } : { kind: 'found', value: r.value };
  }

  /** True when stored; false when the attempt no longer holds the run. */
  async putValue(a: AttemptRef, key: string, value: Buffer): Promise<boolean> {
    const rows = await queryRows<{ key: string }>(
      this.ds,
      `WITH run AS (${HELD})
       INSERT INTO run_values (run_id, key, value, fencing_token, updated_at)
       SELECT id, $3, $4, $2::bigint, now() FROM run
       ON CONFLICT ON CONSTRAINT pk_run_values DO UPDATE
         SET value = EXCLUDED.value, fencing_token = EXCLUDED.fencing_token, updated_at = now()
       RETURNING key`,
      [a.runId, a.fencingToken, key, value],
    );
    return rows.length > 0;
  }

  /** The journal, in order of first start (GET /api/runs/:id/steps). */
  list(runId: string): Promise<StepRow[]> {
    return queryRows<StepRow>(
      this.ds,
      `SELECT name, status, attempt, fencing_token, exit_code, output_bytes, started_at, finished_at
         FROM run_steps WHERE run_id = $1 ORDER BY id`,
      [runId],
    );
  }
}
