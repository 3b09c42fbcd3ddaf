import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { auth, closeDb, startApp, TestApp } from './support/app';
import { tempDir, testEnv } from './support/env';

const name = () => `ws-${Math.random().toString(36).slice(2)}`;

/**
 * Any API key can create a project, and a project's runs execute in its workspace: the path must
 * stay inside WORKSPACE_ROOT (symlinks resolved) and belong to no other project. What is checked
 * from outside: the answer, the directories on disk, and that the name was never taken.
 */
describe('POST /api/projects: workspacePath confinement', () => {
  let t: TestApp;
  let root: string;
  let outside: string;
  beforeAll(async () => {
    t = await startApp(testEnv('ws-confine', `${tempDir('ws-confine')}/executions.log`, { APP_ROLE: 'api' }));
    root = t.config.runs.workspaceRoot;
    outside = tempDir('ws-outside');
    symlinkSync(outside, join(root, 'link-out'));
  });
  afterAll(async () => {
    await t.close();
    await closeDb();
  });

  const create = (body: Record<string, unknown>) =>
    t.http
      .post('/api/projects')
      .set(auth)
      .send({ name: name(), ...body });

  async function expectRefused(workspacePath: string, message: RegExp): Promise<void> {
    const projectName = name();
    const res = await t.http.post('/api/projects').set(auth).send({ name: projectName, workspacePath });
    expect({ status: res.status, body: res.body }).toEqual({
      status: 400,
      body: { statusCode: 400, error: 'Bad Request', message: expect.stringMatching(message) },
    });
    // Nothing was created: the name is still free.
    const again = await t.http.post('/api/projects').set(auth).send({ name: projectName });
    expect(again.status).toBe(201);
  }

  it('keeps the default workspace <WORKSPACE_ROOT>/<project id>', async () => {
    const res = await create({});
    expect(res.status).toBe(201);
    expect(res.body.workspacePath).toBe(join(root, res.body.id));
    expect(existsSync(res.body.workspacePath)).toBe(true);
  });

  it('accepts a new directory inside the root and stores it resolved (symlinks inside the root followed)', async () => {
    mkdirSync(join(root, 'real-dir'));
    symlinkSync(join(root, 'real-dir'), join(root, 'link-in'));
    const res = await create({ workspacePath: `${root}/link-in/./svc/../app` });
    expect(res.status).toBe(201);
    expect(res.body.workspacePath).toBe(join(root, 'real-dir', 'app'));
    expect(existsSync(join(root, 'real-dir', 'app'))).toBe(true);
  });

  it.each<[string, () => string, RegExp]>([
    ['the filesystem root', () => '/', /must resolve inside WORKSPACE_ROOT/],
    ['the service home', () => process.cwd(), /must resolve inside WORKSPACE_ROOT/],
    ['WORKSPACE_ROOT itself', () => root, /not WORKSPACE_ROOT itself/],
    ['a .. escape', () => `${root}/a/../../escaped`, /must resolve inside WORKSPACE_ROOT/],
    [
      'a symlink inside the root that points outside',
      () => join(root, 'link-out'),
      /must resolve inside WORKSPACE_ROOT/,
    ],
    ['a new directory below that symlink', () => join(root, 'link-out', 'new'), /must resolve inside WORKSPACE_ROOT/],
    ['a relative path', () => 'workspaces/x', /absolute path/],
    ['a path holding a NUL character', () => `${root}/x\u0000y`, /absolute path/],
  ])('refuses %s with 400 and creates nothing', async (_name, path, message) => {
    await expectRefused(path(), message);
    expect(existsSync(join(outside, 'new'))).toBe(false);
    expect(existsSync(join(root, 'a'))).toBe(false);
  });

  describe("another project's files", () => {
    let owner: { id: string; workspacePath: string };
    beforeAll(async () => {
      // A workspace of its own choosing: its task workspaces still live in <root>/<its id>/tasks.
      const res = await create({ workspacePath: join(root, 'team', 'owner') });
      expect(res.status).toBe(201);
      owner = res.body;
    });

    it.each<[string, () => string]>([
      ['its workspace', () => owner.workspacePath],
      ['its workspace through a symlink', () => join(root, 'to-owner')],
      ['a directory inside its workspace', () => join(owner.workspacePath, 'src')],
      ['a parent of its workspace', () => join(root, 'team')],
      ['its task area <root>/<id>', () => join(root, owner.id)],
      ['one of its task workspaces', () => join(root, owner.id, 'tasks', '00000000-0000-4000-8000-000000000000')],
    ])('refuses %s with 400', async (_name, path) => {
      if (!existsSync(join(root, 'to-owner'))) symlinkSync(owner.workspacePath, join(root, 'to-owner'));
      await expectRefused(path(), new RegExp(`overlaps the workspace of project ${owner.id}`));
      expect(existsSync(join(owner.workspacePath, 'src'))).toBe(false);
    });

    it('accepts a sibling whose name only starts like it', async () => {
      const res = await create({ workspacePath: `${owner.workspacePath}-2` });
      expect(res.status).toBe(201);
    });
  });

  it('lets exactly one of several concurrent creates with nested paths win', async () => {
    for (let round = 0; round < 5; round++) {
      const base = join(root, `nest-${round}`);
      // A chain: every two of these overlap, so exactly one may be created.
      const paths = ['', 'a', 'a/b', 'a/b/c', 'a/b/c/d', 'a/b/c/d/e'].map((p) => join(base, p));
      const answers = await Promise.all(paths.map((workspacePath) => create({ workspacePath })));
      expect(answers.map((a) => a.status).sort()).toEqual([201, 400, 400, 400, 400, 400]);
    }
  });
});
