import { ChildProcess, execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { checkServices } from '../src/common/preflight';
import { dataSourceOptions } from '../src/database/data-source-options';
import { runMigrations } from '../src/database/prepare-database';
import { auth, count, createProject, createRun, freePort, startApp, waitFor } from './support/app';
import { ROOT, tempDir, testConfig, testDatabaseUrl, testEnv } from './support/env';

const run = promisify(execFile);
const SCRIPT = join(ROOT, 'deploy/postgres/10-onceflow-app-role.sh');
/** Roles are cluster-wide: one of this test run's own. */
const ROLE = `oft_app_${process.env.ONCEFLOW_TEST_RUN_ID}`;
const PASSWORD = 'app-pass-0123456789';

const superuserUrl = (db: string) => {
  const u = new URL(testDatabaseUrl());
  u.pathname = `/${db}`;
  return u.toString();
};
const roleUrl = (db: string) => {
  const u = new URL(superuserUrl(db));
  u.username = ROLE;
  u.password = PASSWORD;
  return u.toString();
};

async function admin<T>(work: (pg: Client) => Promise<T>, db = 'postgres'): Promise<T> {
  const pg = new Client({ connectionString: superuserUrl(db) });
  await pg.connect();
  try {
    return await work(pg);
  } finally {
    await pg.end();
  }
}

const scratch: string[] = [];
/** An empty database, made by the superuser as the postgres image makes POSTGRES_DB. */
async function scratchDatabase(suffix: string): Promise<string> {
  const name = `${new URL(testDatabaseUrl()).pathname.slice(1)}_${suffix}`;
  await admin((pg) => pg.query(`CREATE DATABASE "${name}"`));
  scratch.push(name);
  return name;
}

/** What a managed Postgres gives its admin: roles and databases, no superuser. */
const MANAGED_ADMIN = `oft_admin_${process.env.ONCEFLOW_TEST_RUN_ID}`;

/** The compose init script, run as docker-entrypoint-initdb.d runs it (but over TCP). */
async function roleScript(db: string, asUser?: string): Promise<string> {
  const target = new URL(testDatabaseUrl());
  const { stdout } = await run('bash', [SCRIPT], {
    env: {
      PATH: process.env.PATH,
      PGHOST: target.hostname,
      PGPORT: target.port || '5432',
      POSTGRES_USER: asUser ?? (decodeURIComponent(target.username) || 'postgres'),
      POSTGRES_DB: db,
      ONCEFLOW_DB_USER: ROLE,
      ONCEFLOW_DB_PASSWORD: PASSWORD,
    },
  });
  return stdout;
}

async function asRole<T>(db: string, work: (pg: Client) => Promise<T>): Promise<T> {
  const pg = new Client({ connectionString: roleUrl(db) });
  await pg.connect();
  try {
    return await work(pg);
  } finally {
    await pg.end();
  }
}

const refusal = (pg: Client, sql: string) =>
  pg.query(sql).then(
    () => 'allowed',
    (err: { code?: string }) => err.code,
  );

async function notOwnedByRole(db: string): Promise<string[]> {
  return admin(async (pg) => {
    const { rows } = await pg.query(
      `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S', 'i', 'v') AND pg_get_userbyid(c.relowner) <> $1`,
      [ROLE],
    );
    return rows.map((r) => r.relname as string).sort();
  }, db);
}

afterAll(async () => {
  await admin(async (pg) => {
    for (const db of scratch) await pg.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
    await pg.query(`DROP ROLE IF EXISTS "${ROLE}"`);
    await pg.query(`DROP ROLE IF EXISTS "${MANAGED_ADMIN}"`);
  });
});

/**
 * docker-compose and the docs give onceflow a Postgres role of its own (deploy/postgres): no
 * superuser, owner of its database. These tests run that exact script and then the app's
 * migrations and a run as that role.
 */
describe('the app database role (deploy/postgres/10-onceflow-app-role.sh)', () => {
  it('creates a role that is no superuser, owns a fresh database, and runs every migration down and up again', async () => {
    const db = await scratchDatabase('role_fresh');
    expect(await roleScript(db)).toContain(`role ${ROLE} owns database ${db}`);
    const { rows } = await admin((pg) =>
      pg.query(
        'SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1',
        [ROLE],
      ),
    );
    expect(rows).toEqual([
      { rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolreplication: false, rolbypassrls: false },
    ]);

    const applied = await runMigrations(roleUrl(db));
    expect(applied.length).toBeGreaterThan(0);
    expect(await notOwnedByRole(db)).toEqual([]);
    const ds = new DataSource({ ...dataSourceOptions(roleUrl(db), 2) });
    await ds.initialize();
    for (let i = 0; i < applied.length; i++) await ds.undoLastMigration();
    await ds.destroy();
    expect(await runMigrations(roleUrl(db))).toEqual(applied);

    // What a superuser could do and this role cannot: run programs, read server files, make databases.
    await asRole(db, async (pg) => {
      expect(await refusal(pg, `COPY (SELECT 1) TO PROGRAM 'true'`)).toBe('42501');
      expect(await refusal(pg, `SELECT pg_read_file('PG_VERSION')`)).toBe('42501');
      expect(await refusal(pg, `CREATE DATABASE "${db}_more"`)).toBe('42501');
      expect(await refusal(pg, `ALTER SYSTEM SET work_mem = '64MB'`)).toBe('42501');
    });
  });

  it('takes over a database an earlier onceflow migrated as the superuser, and may be run again', async () => {
    const db = await scratchDatabase('role_adopt');
    const applied = await runMigrations(superuserUrl(db));
    expect((await notOwnedByRole(db)).length).toBeGreaterThan(0);
    await roleScript(db);
    // A second run also takes back what someone granted the role in between.
    await admin((pg) => pg.query(`ALTER ROLE "${ROLE}" CREATEDB CREATEROLE BYPASSRLS`));
    await roleScript(db);
    expect(await notOwnedByRole(db)).toEqual([]);
    const { rows } = await admin((pg) =>
      pg.query('SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = $1', [ROLE]),
    );
    expect(rows).toEqual([{ rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolbypassrls: false }]);
    // Owner of the tables and of their sequences: it can migrate and insert as before.
    const ds = new DataSource({ ...dataSourceOptions(roleUrl(db), 2) });
    await ds.initialize();
    await ds.undoLastMigration();
    await ds.destroy();
    expect(await runMigrations(roleUrl(db))).toEqual(applied.slice(-1));
    await asRole(db, async (pg) => {
      const { rows } = await pg.query(`SELECT nextval(pg_get_serial_sequence('run_events', 'id'))::int AS n`);
      expect(rows[0].n).toBeGreaterThan(0);
    });
  });
});

describe('the app database role on a managed Postgres', () => {
  it('is set up by an admin that may create roles and databases but is no superuser', async () => {
    await admin((pg) => pg.query(`CREATE ROLE "${MANAGED_ADMIN}" LOGIN CREATEROLE CREATEDB`));
    const db = `${new URL(testDatabaseUrl()).pathname.slice(1)}_role_managed`;
    await admin((pg) => pg.query(`CREATE DATABASE "${db}" OWNER "${MANAGED_ADMIN}"`));
    scratch.push(db);
    // The admin migrated it before (an install that connected as the admin), then hands it over.
    const adminUrl = new URL(superuserUrl(db));
    adminUrl.username = MANAGED_ADMIN;
    const applied = await runMigrations(adminUrl.toString());
    await roleScript(db, MANAGED_ADMIN);
    expect(await notOwnedByRole(db)).toEqual([]);
    const { rows } = await admin((pg) =>
      pg.query('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1', [db]),
    );
    expect(rows).toEqual([{ owner: ROLE }]);
    const ds = new DataSource({ ...dataSourceOptions(roleUrl(db), 2) });
    await ds.initialize();
    await ds.undoLastMigration();
    await ds.destroy();
    expect(await runMigrations(roleUrl(db))).toEqual(applied.slice(-1));
  });
});

describe('the app against its own Postgres role and a Redis that requires a password', () => {
  let redis: ChildProcess;
  let redisPort: number;
  const REDIS_PASSWORD = 'redis-pass-0123456789';
  beforeAll(async () => {
    redisPort = await freePort();
    redis = spawn(
      'redis-server',
      [
        '--port',
        String(redisPort),
        '--bind',
        '127.0.0.1',
        '--requirepass',
        REDIS_PASSWORD,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      {
        stdio: 'ignore',
      },
    );
    await waitFor(
      async () => {
        const probe = new Redis({
          port: redisPort,
          host: '127.0.0.1',
          password: REDIS_PASSWORD,
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        try {
          await probe.connect();
          return (await probe.ping()) === 'PONG';
        } finally {
          probe.disconnect();
        }
      },
      10_000,
      'the password-protected redis-server',
    );
  });
  afterAll(() => redis?.kill('SIGKILL'));

  it('runs a command once, end to end, with credentials only in DATABASE_URL and REDIS_URL', async () => {
    const db = await scratchDatabase('role_app');
    await roleScript(db);
    await runMigrations(roleUrl(db));
    const countFile = join(tempDir('role-app'), 'executions.log');
    const env = testEnv('role-app', countFile, {
      APP_ROLE: 'all',
      DATABASE_URL: roleUrl(db),
      REDIS_URL: `redis://:${REDIS_PASSWORD}@127.0.0.1:${redisPort}/0`,
    });

    // The password is really required: without it the start-up check stops the process.
    await expect(checkServices(testConfig({ ...env, REDIS_URL: `redis://127.0.0.1:${redisPort}/0` }))).rejects.toThrow(
      /cannot reach Redis/,
    );
    await checkServices(testConfig(env));

    const t = await startApp(env);
    try {
      const project = await createProject(t.http);
      const created = await createRun(t.http, project.id, 'as the app role', true);
      await waitFor(
        async () => (await t.http.get(`/api/runs/${created.id}`).set(auth)).body.status === 'SUCCESS',
        30_000,
        'the run to succeed',
      );
      expect(count(countFile, 'start', created.id)).toBe(1);
      expect(count(countFile, 'done', created.id)).toBe(1);
    } finally {
      await t.close();
    }
  });
});
