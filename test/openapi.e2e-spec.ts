import Ajv from 'ajv';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REDIS_CLIENT } from '../src/locks/locks.tokens';
import { RUN_STATUSES } from '../src/runs/run-status';
import { auth, closeDb, db, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';
import { lintAndGenerateClient, OpenApiDocument, operations, Problem, strict, typeCheck } from './support/openapi';
import { deliver, newWorkItem, PLANE_SECRET, v1Body } from './support/plane';

/**
 * The served OpenAPI document is one a generated client can use: Redocly's recommended rules pass
 * with no error and no warning (redocly.yaml), every answer of every operation has a schema and
 * every error answer the { statusCode, error, message } one, real answers match their schemas, and
 * the client types openapi-typescript generates from it type-check a snippet that uses them.
 */
// No credential by design (auth.e2e-spec.ts holds the same list for the router).
const PUBLIC_OPERATIONS = ['GET /health/live', 'GET /health/ready', 'GET /metrics', 'POST /webhooks/plane'];
// They take no input and report their own state (terminus' shape), not a client error.
const PROBES = ['GET /health/live', 'GET /health/ready', 'GET /metrics'];
const ERROR_REF = '#/components/schemas/ErrorResponse';
const BODY_LIMIT = 16 * 1024;

describe('OpenAPI document at /docs-json', () => {
  const dir = tempDir('openapi');
  let t: TestApp;
  let doc: OpenApiDocument;
  let problems: Problem[];
  let clientTypes: string;

  beforeAll(async () => {
    t = await startApp(
      testEnv('openapi', join(dir, 'executions.log'), {
        APP_ROLE: 'api',
        PLANE_WEBHOOK_SECRETS: PLANE_SECRET,
        WEBHOOK_BODY_LIMIT_BYTES: String(BODY_LIMIT),
      }),
    );
    const res = await t.http.get('/docs-json');
    expect(res.status).toBe(200);
    doc = res.body;
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(doc));
    problems = lintAndGenerateClient(join(dir, 'openapi.json'), join(dir, 'schema.d.ts'));
    clientTypes = readFileSync(join(dir, 'schema.d.ts'), 'utf8');
  });
  afterAll(async () => {
    await t?.close();
    await closeDb();
  });

  it("passes Redocly's recommended rules with no error and no warning", () => {
    // Listed in full so a failure says which rule and where.
    expect(problems.map((p) => `${p.severity} ${p.ruleId} at ${p.pointer}: ${p.message}`)).toEqual([]);
    expect(doc.servers?.length).toBeGreaterThan(0);
  });

  it('gives every operation a summary, and bearer security on /api/* and explicitly none elsewhere', () => {
    for (const [route, op] of operations(doc)) {
      expect({ route, summary: Boolean(op.summary?.trim()) }).toEqual({ route, summary: true });
      const expected = PUBLIC_OPERATIONS.includes(route) ? [] : [{ bearer: [] }];
      expect({ route, security: op.security }).toEqual({ route, security: expected });
      if (!PUBLIC_OPERATIONS.includes(route)) expect(route.split(' ')[1]).toMatch(/^\/api\//);
    }
    expect(operations(doc).map(([route]) => route)).toEqual(expect.arrayContaining(PUBLIC_OPERATIONS));
  });

  it('gives every answer a schema, and every error answer the { statusCode, error, message } schema', () => {
    expect(doc.components.schemas.ErrorResponse).toEqual({
      type: 'object',
      properties: {
        statusCode: expect.objectContaining({ type: 'integer' }),
        error: expect.objectContaining({ type: 'string' }),
        message: expect.objectContaining({ type: 'string' }),
      },
      required: ['statusCode', 'error', 'message'],
    });
    const missing: string[] = [];
    for (const [route, op] of operations(doc)) {
      const statuses = Object.keys(op.responses);
      if (!PROBES.includes(route) && !statuses.some((s) => s.startsWith('4'))) missing.push(`${route}: no 4xx answer`);
      if (route.includes(' /api/') && !statuses.includes('401')) missing.push(`${route}: no 401 (bearer) answer`);
      for (const [status, answer] of Object.entries(op.responses)) {
        const media = Object.entries(answer.content ?? {});
        if (media.length === 0) missing.push(`${route} ${status}: no body schema`);
        for (const [type, { schema }] of media) {
          if (!schema || Object.keys(schema).length === 0) missing.push(`${route} ${status} ${type}: empty schema`);
          const isError = Number(status) >= 400 && !route.startsWith('GET /health/');
          if (isError && schema?.$ref !== ERROR_REF) missing.push(`${route} ${status}: not the error schema`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('describes the answers the app really gives (each validated against its documented schema)', async () => {
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    ajv.addSchema(strict({ components: doc.components }), 'openapi');
    const seen: string[] = [];
    const problems: string[] = [];
    // `route` is the document's path template; the response must be documented and match.
    const expectDocumented = async (route: string, res: { status: number; body: unknown; text: string }) => {
      const [method, path] = route.split(' ');
      const answer = doc.paths[path]?.[method.toLowerCase()]?.responses[String(res.status)];
      seen.push(`${route} ${res.status}`);
      if (!answer?.content) return void problems.push(`${route} answered ${res.status}, which is not documented`);
      const [type, { schema }] = Object.entries(answer.content)[0];
      const body = type === 'application/json' ? res.body : res.text;
      const validate = ajv.compile(strict(schema!));
      if (!validate(body))
        problems.push(
          `${route} ${res.status}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(body).slice(0, 300)}`,
        );
    };
    const { http } = t;
    const unknown = randomUUID();

    const project = await http
      .post('/api/projects')
      .set(auth)
      .send({ name: `openapi-${randomUUID()}` });
    await expectDocumented('POST /api/projects', project);
    await expectDocumented(
      'POST /api/projects',
      await http.post('/api/projects').set(auth).send({ name: project.body.name }),
    );
    await expectDocumented('POST /api/projects', await http.post('/api/projects').set(auth).send({}));
    await expectDocumented('GET /api/projects', await http.get('/api/projects').set(auth).query({ limit: 1 }));
    await expectDocumented('GET /api/projects', await http.get('/api/projects').set(auth).query({ cursor: 'nope' }));
    await expectDocumented('GET /api/projects/{id}', await http.get(`/api/projects/${project.body.id}`).set(auth));
    await expectDocumented('GET /api/projects/{id}', await http.get(`/api/projects/${unknown}`).set(auth));
    await expectDocumented('GET /api/projects/{id}', await http.get('/api/projects/not-a-uuid').set(auth));
    await expectDocumented('GET /api/projects', await http.get('/api/projects'));

    const runs = `/api/projects/${project.body.id}/runs`;
    const run = await http.post(runs).set(auth).send({ requirement: 'documented' });
    await expectDocumented('POST /api/projects/{id}/runs', run);
    const key = `openapi-${randomUUID()}`;
    await http.post(runs).set(auth).set('Idempotency-Key', key).send({ requirement: 'once' });
    await expectDocumented(
      'POST /api/projects/{id}/runs',
      await http.post(runs).set(auth).set('Idempotency-Key', key).send({ requirement: 'once' }),
    );
    await expectDocumented(
      'POST /api/projects/{id}/runs',
      await http.post(runs).set(auth).set('Idempotency-Key', key).send({ requirement: 'other' }),
    );
    await expectDocumented(
      'POST /api/projects/{id}/runs',
      await http.post(`/api/projects/${unknown}/runs`).set(auth).send({ requirement: 'x' }),
    );

    const id = run.body.id as string;
    await expectDocumented(
      'GET /api/runs',
      await http.get('/api/runs').set(auth).query({ projectId: project.body.id }),
    );
    await expectDocumented('GET /api/runs', await http.get('/api/runs').set(auth).query({ status: 'BOGUS' }));
    await expectDocumented('GET /api/runs/{id}', await http.get(`/api/runs/${id}`).set(auth));
    await expectDocumented('GET /api/runs/{id}', await http.get(`/api/runs/${unknown}`).set(auth));
    await expectDocumented('GET /api/runs/{id}/events', await http.get(`/api/runs/${id}/events`).set(auth));
    // A journal with a finished and an unfinished step, as a command's `onceflow step`s leave it.
    await db().query(
      `INSERT INTO run_steps (run_id, name, status, attempt, fencing_token, exit_code, output, output_bytes, started_at, finished_at)
       VALUES ($1, 'plan', 'DONE', 1, 1, 0, 'x', 1, now(), now()), ($1, 'push', 'STARTED', 1, 1, NULL, NULL, 0, now(), NULL)`,
      [id],
    );
    await expectDocumented('GET /api/runs/{id}/steps', await http.get(`/api/runs/${id}/steps`).set(auth));
    await expectDocumented('GET /api/runs/{id}/steps', await http.get(`/api/runs/${unknown}/steps`).set(auth));
    const second = await http.post(runs).set(auth).send({ requirement: 'dispatched in bulk' });
    await expectDocumented(
      'POST /api/runs/dispatch',
      await http
        .post('/api/runs/dispatch')
        .set(auth)
        .send({ runIds: [second.body.id, unknown] }),
    );
    await expectDocumented(
      'POST /api/runs/dispatch',
      await http.post('/api/runs/dispatch').set(auth).send({ runIds: [] }),
    );
    await expectDocumented('POST /api/runs/{id}/dispatch', await http.post(`/api/runs/${id}/dispatch`).set(auth));
    await expectDocumented('POST /api/runs/{id}/dispatch', await http.post(`/api/runs/${id}/dispatch`).set(auth));
    await expectDocumented('POST /api/runs/{id}/retry', await http.post(`/api/runs/${id}/retry`).set(auth));
    await expectDocumented('POST /api/runs/{id}/cancel', await http.post(`/api/runs/${id}/cancel`).set(auth));
    await expectDocumented('POST /api/runs/{id}/cancel', await http.post(`/api/runs/${id}/cancel`).set(auth));
    await expectDocumented(
      'GET /api/notifications',
      await http.get('/api/notifications').set(auth).query({ runId: id }),
    );
    await expectDocumented('GET /api/notifications', await http.get('/api/notifications').set(auth));

    const body = v1Body(newWorkItem(), 'created');
    const accepted = await deliver(t, body);
    await expectDocumented('POST /webhooks/plane', accepted);
    await expectDocumented('POST /webhooks/plane', await deliver(t, body));
    await expectDocumented('POST /webhooks/plane', await deliver(t, body, { signature: 'f'.repeat(64) }));
    await expectDocumented('POST /webhooks/plane', await deliver(t, '{"not json'));
    await expectDocumented('POST /webhooks/plane', await deliver(t, JSON.stringify({ pad: 'x'.repeat(BODY_LIMIT) })));
    const tasks = await http.get('/api/tasks').set(auth).query({ provider: 'plane' });
    await expectDocumented('GET /api/tasks', tasks);
    await expectDocumented('GET /api/tasks/{id}', await http.get(`/api/tasks/${tasks.body.items[0]?.id}`).set(auth));
    await expectDocumented('GET /api/tasks/{id}', await http.get(`/api/tasks/${unknown}`).set(auth));
    await expectDocumented('GET /api/webhook-deliveries', await http.get('/api/webhook-deliveries').set(auth));
    await expectDocumented(
      'POST /api/webhook-deliveries/{id}/replay',
      await http.post(`/api/webhook-deliveries/${accepted.body.deliveryId}/replay`).set(auth),
    );
    await expectDocumented(
      'POST /api/webhook-deliveries/{id}/replay',
      await http.post(`/api/webhook-deliveries/${unknown}/replay`).set(auth),
    );

    await expectDocumented('GET /health/live', await http.get('/health/live'));
    await expectDocumented('GET /health/ready', await http.get('/health/ready'));
    await expectDocumented('GET /metrics', await http.get('/metrics'));
    // Not ready: the answer names the failing check (terminus' shape, as documented).
    const redis = t.app.get(REDIS_CLIENT);
    redis.disconnect();
    try {
      const notReady = await http.get('/health/ready');
      await expectDocumented('GET /health/ready', notReady);
      expect(notReady.body.error).toHaveProperty('redis');
    } finally {
      await redis.connect();
    }

    expect(problems).toEqual([]);
    // Every operation answered at least once above, so none is left unchecked: a new route needs
    // its calls here (its success and each error it documents).
    const answered = new Set(seen.map((s) => s.split(' ').slice(0, 2).join(' ')));
    expect(
      operations(doc)
        .map(([route]) => route)
        .filter((r) => !answered.has(r)),
    ).toEqual([]);
    for (const status of ['200', '201', '202', '400', '401', '404', '409', '413', '422', '503'])
      expect(seen.join('\n')).toContain(` ${status}`);
  });

  it('generates client types that a typed TypeScript snippet compiles against', () => {
    const statuses = RUN_STATUSES.map((s) => `'${s}'`).join(' | ');
    // Each operation's answers must come out typed (not unknown) in the generated client.
    const perAnswer = operations(doc).flatMap(([route, op], i) => {
      const [method, path] = route.split(' ');
      return Object.keys(op.responses).map(
        (status) =>
          `const typed${i}_${status}: IsTyped<Body<paths['${path}']['${method.toLowerCase()}']['responses'][${status}]>> = true;`,
      );
    });
    const snippet = `
import type { components, paths } from './schema';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Body<R> = R extends { content: { 'application/json': infer B } } ? B : R extends { content: { 'text/plain': infer T } } ? T : 'no body';
type IsTyped<T> = unknown extends T ? false : T extends 'no body' ? false : true;
type ErrorShape = { statusCode: number; error: string; message: string };

type Run = Body<paths['/api/runs/{id}']['get']['responses']['200']>;
export const statusIsTheUnion: Equal<Run['status'], ${statuses}> = true;
export const errorIsTheShape: Equal<Body<paths['/api/runs/{id}']['get']['responses']['404']>, components['schemas']['ErrorResponse']> = true;
export const errorShape: Equal<components['schemas']['ErrorResponse'], ErrorShape> = true;
// @ts-expect-error not a run status
export const bogus: Run['status'] = 'BOGUS';
export const finishedAt: Run['finishedAt'] = null;

type ProjectPage = Body<paths['/api/projects']['get']['responses']['200']>;
export const page: ProjectPage = { items: [], nextCursor: null };
export const firstName = (p: ProjectPage): string | undefined => p.items[0]?.name;
export const limitIsANumber: paths['/api/projects']['get']['parameters']['query'] = { limit: 10, cursor: 'abc' };
// @ts-expect-error the body of a create is typed
export const badCreate: paths['/api/projects']['post']['requestBody']['content']['application/json'] = { nom: 'x' };

${perAnswer.join('\n')}
`;
    writeFileSync(join(dir, 'snippet.ts'), snippet);
    const diagnostics = typeCheck(join(dir, 'snippet.ts'));
    expect(diagnostics).toEqual([]);
    expect(clientTypes).toContain('ErrorResponse');
  });
});
