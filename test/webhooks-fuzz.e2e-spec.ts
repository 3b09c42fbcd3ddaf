import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { PLANE_SECRET, sign } from './support/plane';
import { Fuzzer, prng } from './support/plane-fuzzer';

const CASES = Number(process.env.FUZZ_CASES ?? 250);
/** Well under a second on this 2-core machine; a 1 MiB body takes ~0.2 s. */
const MAX_ANSWER_MS = 1000;

describe('Plane intake fuzz: malformed bodies, signed and unsigned', () => {
  const countFile = join(tempDir('wh-fuzz'), 'executions.log');
  let t: TestApp;
  let url: string;

  beforeAll(async () => {
    t = await startApp(testEnv('wh-fuzz', countFile, { APP_ROLE: 'api', PLANE_WEBHOOK_SECRETS: PLANE_SECRET }));
    await t.app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}/webhooks/plane`;
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  it(`never answers 5xx, answers each within ${MAX_ANSWER_MS} ms, and creates nothing`, async () => {
    const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const fuzz = new Fuzzer(prng(seed));
    const { rows: started } = await db().query('SELECT now() AS at');
    const before = await db().query(
      `SELECT (SELECT count(*) FROM projects)::int AS projects, (SELECT count(*) FROM tasks)::int AS tasks, (SELECT count(*) FROM runs)::int AS runs`,
    );
    const problems: string[] = [];
    const answers = new Map<number, number>();
    for (let i = 0; i < CASES; i++) {
      const c = fuzz.next(i);
      for (const signed of [true, false]) {
        const headers: Record<string, string> = { 'X-Plane-Delivery': `fuzz-${i}`, 'X-Plane-Event': 'issue' };
        if (c.contentType) headers['Content-Type'] = c.contentType;
        if (signed) headers['X-Plane-Signature'] = sign(c.body);
        else if (i % 2) headers['X-Plane-Signature'] = sign(c.body, 'plane_wh_not_the_secret');
        const at = performance.now();
        const res = await fetch(url, { method: 'POST', headers, body: new Uint8Array(c.body) });
        const text = await res.text();
        const ms = performance.now() - at;
        answers.set(res.status, (answers.get(res.status) ?? 0) + 1);
        const what = `${c.name} ${signed ? 'signed' : 'unsigned'}: ${res.status} in ${ms.toFixed(0)} ms ${text.slice(0, 160)}`;
        if (res.status >= 500) problems.push(what);
        else if (ms > MAX_ANSWER_MS) problems.push(`slow: ${what}`);
        else if (res.status < 300 && !/"status":"(ignored|duplicate)"/.test(text)) problems.push(`acted on: ${what}`);
        else if (!signed && res.status < 300) problems.push(`unsigned but accepted: ${what}`);
      }
    }
    const after = await db().query(
      `SELECT (SELECT count(*) FROM projects)::int AS projects, (SELECT count(*) FROM tasks)::int AS tasks, (SELECT count(*) FROM runs)::int AS runs`,
    );
    const { rows: stored } = await db().query(
      `SELECT status, reason, count(*)::int AS n FROM webhook_deliveries WHERE received_at >= $1 GROUP BY status, reason ORDER BY status, reason`,
      [started[0].at],
    );
    const { rows: tasks } = await db().query(`SELECT count(*)::int AS n FROM tasks WHERE external_id = ANY($1)`, [
      fuzz.ids,
    ]);
    const report = `FUZZ_SEED=${seed} FUZZ_CASES=${CASES} answers ${JSON.stringify(Object.fromEntries(answers))} stored ${JSON.stringify(stored)}`;
    expect({ report, problems: problems.slice(0, 20) }).toEqual({ report, problems: [] });
    expect({ report, totals: after.rows[0] }).toEqual({ report, totals: before.rows[0] });
    expect({ report, tasks: tasks[0].n }).toEqual({ report, tasks: 0 });
    expect({ report, statuses: [...new Set(stored.map((r) => r.status))] }).toEqual({
      report,
      statuses: stored.length ? ['ignored'] : [],
    });
    // The fuzz reached the intake, not just the front door: some signed bodies were stored as ignored.
    expect({ report, ignored: stored.length > 0 }).toEqual({ report, ignored: true });
  });
});
