import { join } from 'node:path';
import { closeDb, db, startProcess, waitFor, WorkerProcess } from './support/app';
import { tempDir, testEnv } from './support/env';
import { newWorkItem, PLANE_SECRET, PLANE_SECRET_2, sign, v1Body } from './support/plane';

/** A real process at trace level (compiled dist): its whole output is what an operator's logs get. */
describe('Plane intake logs', () => {
  let proc: WorkerProcess;

  beforeAll(async () => {
    const env = testEnv('wh-logs', join(tempDir('wh-logs'), 'executions.log'), {
      LOG_LEVEL: 'trace',
      PLANE_WEBHOOK_SECRETS: `${PLANE_SECRET},${PLANE_SECRET_2}`,
    });
    proc = await startProcess(env, 'api');
  });
  afterAll(async () => {
    await proc.stop();
    await closeDb();
  });

  it('never contain a signature or a secret, whatever the outcome', async () => {
    const item = newWorkItem();
    const body = v1Body(item, 'created');
    const signatures = [sign(body), sign(body, PLANE_SECRET_2), sign(body, 'plane_wh_wrong')];
    const post = (signature: string) =>
      fetch(`http://127.0.0.1:${proc.port}/webhooks/plane`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Plane-Signature': signature, 'X-Plane-Delivery': 'd-1' },
        body,
      });
    expect((await post(signatures[0])).status).toBe(202);
    expect((await post(signatures[1])).status).toBe(200);
    expect((await post(signatures[2])).status).toBe(401);
    expect((await post(`sha256=${signatures[0]}`)).status).toBe(401);
    const { rows } = await db().query(`SELECT count(*)::int AS n FROM tasks WHERE external_id = $1`, [item.id]);
    expect(rows[0].n).toBe(1);

    // The request log lines prove logging was on; then nothing secret may be in any line.
    await waitFor(() => (proc.output().match(/\/webhooks\/plane/g) ?? []).length >= 4, 5000, 'four request log lines');
    const out = proc.output();
    for (const s of [...signatures, PLANE_SECRET, PLANE_SECRET_2, 'plane_wh_']) expect(out).not.toContain(s);
  });
});
