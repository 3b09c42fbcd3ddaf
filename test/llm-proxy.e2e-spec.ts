import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { closeDb, createProject, createRun, db, startApp, TestApp, waitFor, waitForStatus } from './support/app';
import { tempDir, testEnv } from './support/env';
import { LlmStub } from './support/llm-stub';

interface Held {
  runId: string;
  openai: string;
  anthropic: string;
  /** Lets the attempt's command exit with `code`. */
  release(code?: number): void;
}

/**
 * A command that publishes its proxy URLs and waits: the test then talks to the worker's LLM
 * proxy exactly as the command's SDK would, while the attempt holds the run.
 */
function holdingCommand(dir: string): string {
  return `env | grep -E '^(OPENAI|ANTHROPIC)_BASE_URL=' > '${dir}/env.'"$RUN_ID.$RUN_ATTEMPT".tmp && mv '${dir}/env.'"$RUN_ID.$RUN_ATTEMPT".tmp '${dir}/env.'"$RUN_ID.$RUN_ATTEMPT"
while [ ! -e '${dir}/release.'"$RUN_ID.$RUN_ATTEMPT" ]; do sleep 0.05; done
exit $(cat '${dir}/release.'"$RUN_ID.$RUN_ATTEMPT")`;
}

/** Waits until attempt `attempt` of the run (a new run when no id is given) holds and published its URLs. */
async function hold(t: TestApp, dir: string, projectId: string, runId?: string, attempt = 1): Promise<Held> {
  const id = runId ?? (await createRun(t.http, projectId, 'held', true)).id;
  const file = join(dir, `env.${id}.${attempt}`);
  await waitFor(() => existsSync(file), 15_000, `attempt ${attempt} of run ${id} to hold the run`);
  const env = Object.fromEntries(
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
  return {
    runId: id,
    openai: env.OPENAI_BASE_URL,
    anthropic: env.ANTHROPIC_BASE_URL,
    release: (code = 0) => writeFileSync(join(dir, `release.${id}.${attempt}`), String(code)),
  };
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: 'gpt-test',
  messages: [{ role: 'user', content }],
  ...extra,
});

async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test-openai-key', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return {
    status: res.status,
    cache: res.headers.get('x-onceflow-cache'),
    type: res.headers.get('content-type'),
    body: Buffer.from(await res.arrayBuffer()),
  };
}

/** A raw request whose path Node's fetch would normalise (`..`), as a hostile command could send. */
function rawStatus(base: string, rawPath: string): Promise<number> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: `${u.pathname}${rawPath}`,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.once('error', reject);
    req.end('{}');
  });
}

describe('LLM proxy (scope run)', () => {
  const dir = tempDir('llm');
  let llm: LlmStub;
  let t: TestApp;

  beforeAll(async () => {
    llm = await LlmStub.start();
    t = await startApp(
      testEnv('llm', join(dir, 'unused.log'), {
        ORCHESTRATOR_COMMAND: holdingCommand(dir),
        LLM_OPENAI_UPSTREAM: llm.openaiUrl,
        LLM_ANTHROPIC_UPSTREAM: llm.anthropicUrl,
        RUN_LOCK_TTL_MS: '3000',
      }),
    );
  });
  afterEach(() => {
    llm.delayMs = 0;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
    await closeDb();
  });

  it('20 identical requests at once make ONE upstream call; all get the same bytes', async () => {
    const project = await createProject(t.http);
    const h = await hold(t, dir, project.id);
    llm.delayMs = 300;
    const before = llm.count();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post(h.openai, '/chat/completions', chat('coalesce me'))),
    );
    expect(llm.count() - before).toBe(1);
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(answers.filter((a) => a.cache === 'miss')).toHaveLength(1);
    expect(answers.filter((a) => a.cache === 'coalesced')).toHaveLength(19);
    for (const a of answers) expect(a.body.equals(answers[0].body)).toBe(true);
    // The provider's key went through to the upstream.
    expect(llm.calls[llm.calls.length - 1].authorization).toBe('Bearer sk-test-openai-key');
    h.release();
    await waitForStatus([h.runId], ['SUCCESS']);
  });

  it('replays a streamed answer byte for byte to the next attempt, and never calls the upstream for it', async () => {
    const project = await createProject(t.http);
    const first = await hold(t, dir, project.id);
    const req = chat('stream me', { stream: true });
    const before = llm.count();
    const live = await post(first.openai, '/chat/completions', req);
    expect(live).toMatchObject({ status: 200, cache: 'miss', type: 'text/event-stream' });
    expect(live.body.toString()).toMatch(/data: \[DONE\]\n\n$/);
    first.release(75); // transient: a second attempt of the same run
    const second = await hold(t, dir, project.id, first.runId, 2);
    expect(second.openai).not.toBe(first.openai); // a new credential
    // Keys in another order are the same request.
    const again = await post(second.openai, '/chat/completions', {
      stream: true,
      messages: req.messages,
      model: req.model,
    });
    expect(again).toMatchObject({ status: 200, cache: 'hit', type: 'text/event-stream' });
    expect(again.body.equals(live.body)).toBe(true);
    expect(llm.count() - before).toBe(1);
    second.release();
    await waitForStatus([first.runId], ['SUCCESS']);
  });

  it('Anthropic-style requests: x-api-key goes through, the answer is cached; a refused credential reaches nobody', async () => {
    const project = await createProject(t.http);
    const h = await hold(t, dir, project.id);
    const body = { model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hello' }] };
    const before = llm.count('anthropic');
    const a = await post(h.anthropic, '/v1/messages', body, { 'x-api-key': 'sk-ant-test-key', authorization: '' });
    const b = await post(h.anthropic, '/v1/messages', body, { 'x-api-key': 'sk-ant-test-key' });
    expect([a.cache, b.cache]).toEqual(['miss', 'hit']);
    expect(b.body.equals(a.body)).toBe(true);
    expect(llm.count('anthropic') - before).toBe(1);
    expect(llm.calls[llm.calls.length - 1].apiKey).toBe('sk-ant-test-key');
    h.release();
    await waitForStatus([h.runId], ['SUCCESS']);
    // The attempt is over: its proxy URL is refused, nothing is forwarded.
    const late = await post(h.anthropic, '/v1/messages', { ...body, messages: [{ role: 'user', content: 'late' }] });
    expect(late.status).toBe(403);
    const forged = await post(h.anthropic.replace(/\/llm\/[^/]+\//, '/llm/ofr_forged/'), '/v1/messages', body);
    expect(forged.status).toBe(403);
    expect(llm.count('anthropic') - before).toBe(1);
  });

  it('never caches a non-2xx answer, and forwards what it cannot key (non-POST, not JSON)', async () => {
    const project = await createProject(t.http);
    const h = await hold(t, dir, project.id);
    const before = llm.count();
    llm.failNext(500);
    const failed = await post(h.openai, '/chat/completions', chat('flaky'));
    expect(failed).toMatchObject({ status: 500, cache: 'miss' });
    const ok = await post(h.openai, '/chat/completions', chat('flaky'));
    const hit = await post(h.openai, '/chat/completions', chat('flaky'));
    expect([ok.status, ok.cache, hit.cache]).toEqual([200, 'miss', 'hit']);
    const notJson = await post(h.openai, '/chat/completions', 'not json');
    const notJson2 = await post(h.openai, '/chat/completions', 'not json');
    expect([notJson.cache, notJson2.cache]).toEqual(['miss', 'miss']);
    const get1 = await fetch(`${h.openai}/models`);
    const get2 = await fetch(`${h.openai}/models`);
    expect([get1.status, get2.status]).toEqual([200, 200]);
    expect(llm.count() - before).toBe(6);
    h.release();
    await waitForStatus([h.runId], ['SUCCESS']);
  });

  it('a pooled upstream connection found dead: the request goes again on a new one, the command gets its answer', async () => {
    const project = await createProject(t.http);
    const h = await hold(t, dir, project.id);
    // The first call leaves its connection in the proxy's pool; the next one meets it dead.
    expect((await post(h.openai, '/chat/completions', chat('pooled 1'))).status).toBe(200);
    const before = llm.count();
    llm.resetReusedNext();
    const again = await post(h.openai, '/chat/completions', chat('pooled 2'));
    expect([again.status, again.cache]).toEqual([200, 'miss']);
    expect(again.body.toString()).toContain('pooled 2');
    expect(llm.resets).toBe(1);
    expect(llm.count() - before).toBe(1);
    h.release();
    await waitForStatus([h.runId], ['SUCCESS']);
  });

  it('only the configured upstream is ever contacted: paths that would leave it are refused', async () => {
    const project = await createProject(t.http);
    const h = await hold(t, dir, project.id);
    const before = llm.count();
    for (const path of [
      '/../../etc/passwd',
      '/%2e%2e/%2e%2e/x',
      '/..%2fx',
      '//evil.example/x',
      '/x/../../../y',
      '/\\x',
    ])
      expect({ path, status: await rawStatus(h.openai, path) }).toEqual({ path, status: 400 });
    expect(llm.count() - before).toBe(0);
    h.release();
    await waitForStatus([h.runId], ['SUCCESS']);
  });

  it('one run never gets another run’s answers (scope run); stores no header, so no API key', async () => {
    const project = await createProject(t.http);
    const a = await hold(t, dir, project.id);
    const before = llm.count();
    expect((await post(a.openai, '/chat/completions', chat('shared prompt'))).cache).toBe('miss');
    a.release();
    await waitForStatus([a.runId], ['SUCCESS']);
    const b = await hold(t, dir, project.id);
    expect((await post(b.openai, '/chat/completions', chat('shared prompt'))).cache).toBe('miss');
    expect(llm.count() - before).toBe(2);
    b.release();
    await waitForStatus([b.runId], ['SUCCESS']);
    const { rows } = await db().query(
      `SELECT count(*)::int AS n FROM llm_cache_entries WHERE convert_from(body, 'UTF8') LIKE '%sk-test%' OR scope LIKE '%sk-%'`,
    );
    expect(rows[0].n).toBe(0);
    const scopes = (
      await db().query(`SELECT scope FROM llm_cache_entries WHERE scope = ANY($1)`, [
        [`run:${a.runId}`, `run:${b.runId}`],
      ])
    ).rows;
    expect(scopes).toHaveLength(2);
  });
});

describe('LLM proxy (scope project, TTL and size cap) and scope off', () => {
  const dir = tempDir('llm-scope');
  let llm: LlmStub;
  let project: TestApp;
  let off: TestApp;

  beforeAll(async () => {
    llm = await LlmStub.start();
    const base = {
      ORCHESTRATOR_COMMAND: holdingCommand(dir),
      LLM_OPENAI_UPSTREAM: llm.openaiUrl,
      RUN_LOCK_TTL_MS: '3000',
      WORKER_CONCURRENCY: '8',
    };
    project = await startApp(
      testEnv('llm-project', join(dir, 'u.log'), {
        ...base,
        LLM_CACHE_SCOPE: 'project',
        LLM_CACHE_TTL_MS: '2000',
        LLM_CACHE_MAX_BYTES: '2000',
      }),
    );
    off = await startApp(testEnv('llm-off', join(dir, 'u.log'), { ...base, LLM_CACHE_SCOPE: 'off' }));
  });
  afterAll(async () => {
    await project.close();
    await off.close();
    await llm.close();
    await closeDb();
  });

  it('project: the runs of one project share answers, another project never does; answers expire; big ones are not stored', async () => {
    const p1 = await createProject(project.http, { maxConcurrentRuns: 5 });
    const p2 = await createProject(project.http, { maxConcurrentRuns: 5 });
    const [a, b, c] = await Promise.all([
      hold(project, dir, p1.id),
      hold(project, dir, p1.id),
      hold(project, dir, p2.id),
    ]);
    const before = llm.count();
    expect((await post(a.openai, '/chat/completions', chat('team prompt'))).cache).toBe('miss');
    expect((await post(b.openai, '/chat/completions', chat('team prompt'))).cache).toBe('hit');
    expect((await post(c.openai, '/chat/completions', chat('team prompt'))).cache).toBe('miss');
    expect(llm.count() - before).toBe(2);
    // Over LLM_CACHE_MAX_BYTES: forwarded, never stored.
    const big = chat('big', { pad: 5000 });
    const big1 = await post(a.openai, '/chat/completions', big);
    const big2 = await post(a.openai, '/chat/completions', big);
    expect([big1.status, big1.cache, big2.cache]).toEqual([200, 'miss', 'miss']);
    expect(big1.body.length).toBeGreaterThan(5000);
    expect(llm.count() - before).toBe(4);
    // After LLM_CACHE_TTL_MS the answer is asked for again (and replaces the expired one).
    await new Promise((r) => setTimeout(r, 2100));
    expect((await post(b.openai, '/chat/completions', chat('team prompt'))).cache).toBe('miss');
    expect(llm.count() - before).toBe(5);
    for (const h of [a, b, c]) h.release();
    await waitForStatus([a.runId, b.runId, c.runId], ['SUCCESS']);
  });

  it('off: every request is forwarded, even identical ones at the same moment', async () => {
    const p = await createProject(off.http);
    const h = await hold(off, dir, p.id);
    llm.delayMs = 200;
    const before = llm.count();
    const answers = await Promise.all(
      Array.from({ length: 3 }, () => post(h.openai, '/chat/completions', chat('no cache'))),
    );
    expect(answers.map((a) => a.cache)).toEqual(['miss', 'miss', 'miss']);
    expect(llm.count() - before).toBe(3);
    llm.delayMs = 0;
    h.release();
    await waitForStatus([h.runId], ['SUCCESS']);
  });
});
