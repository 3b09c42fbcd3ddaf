import { CORE_SCHEMA, load, loadAll, mergeTag } from 'js-yaml';
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './support/env';

/**
 * The deploy files carry guarantees no running test sees (there is no container engine here):
 * who each process runs as, which capabilities it holds, what it may reach, which credentials
 * it gets. These checks read the files as compose and Kubernetes would and fail when one of
 * those settings is lost.
 */
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const read = (...path: string[]) => readFileSync(join(ROOT, ...path), 'utf8');
const yamlDocs = (...path: string[]) => (loadAll(read(...path)) as Obj[]).filter(Boolean);

const WORKER_CAPS = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'KILL', 'SETGID', 'SETUID'];
const RUN_USER = 'onceflow-run';
const RUN_UID = 10001;

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  it('runs on Node 22 LTS under tini, as the unprivileged node user by default', () => {
    const stages = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    expect(stages).toEqual(['node:22-bookworm-slim', 'node:22-bookworm-slim']);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--"\]$/m);
    expect([...dockerfile.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1])).toEqual(['node']);
  });

  it(`creates ${RUN_USER} (uid ${RUN_UID}) with no login shell and no home`, () => {
    // Continuation lines joined, as the shell sees the RUN line.
    const useradd = /useradd\s+([^\n]*)/.exec(dockerfile.replace(/\\\n/g, ' '))?.[1] ?? '';
    expect(useradd).toContain(`--uid ${RUN_UID}`);
    expect(useradd).toContain('--no-create-home');
    expect(useradd).toContain('--shell /usr/sbin/nologin');
    expect(useradd.trim().endsWith(RUN_USER)).toBe(true);
  });

  it('keeps package.json engines at Node 20.19+ (the code runs on both)', () => {
    expect(JSON.parse(read('package.json')).engines.node).toBe('>=20.19');
  });
});

describe('docker-compose.yml', () => {
  const compose = load(read('docker-compose.yml'), { schema: CORE_SCHEMA.withTags(mergeTag) }) as Obj;
  const services = compose.services as Record<string, Obj>;
  // What compose does with ${NAME:?message} and ${NAME}: the value from .env.
  const dotenv: Record<string, string> = {
    POSTGRES_PASSWORD: 'super-pw',
    ONCEFLOW_DB_PASSWORD: 'app-pw',
    REDIS_PASSWORD: 'redis-pw',
  };
  const interpolate = (s: string) =>
    s.replace(/\$\{([A-Z_]+)(?::?[?-][^}]*)?\}/g, (_m, name: string) => dotenv[name] ?? '');

  it.each(['api', 'worker', 'scheduler'])(
    '%s: read-only root, /tmp in memory, no capabilities but those listed, no new privileges',
    (name) => {
      const s = services[name];
      expect(s.read_only).toBe(true);
      // The worker's /tmp holds the onceflow CLI its commands run: it must allow exec (Docker's default is noexec).
      expect(s.tmpfs).toEqual(name === 'worker' ? ['/tmp:exec,mode=1777'] : ['/tmp']);
      expect(s.cap_drop).toEqual(['ALL']);
      expect(s.security_opt).toEqual(['no-new-privileges:true']);
      expect(s.privileged).toBeUndefined();
    },
  );

  it.each(['api', 'scheduler'])('%s runs as node with no capability at all', (name) => {
    expect(services[name].user).toBe('node');
    expect(services[name].cap_add).toBeUndefined();
  });

  it(`worker runs as root with exactly the capabilities the switch to ${RUN_USER} needs`, () => {
    const w = services.worker;
    expect(w.user).toBe('0:0');
    expect([...w.cap_add].sort()).toEqual(WORKER_CAPS);
    expect(w.environment.RUN_AS_USER).toBe(RUN_USER);
  });

  it("connects as onceflow's own Postgres role and with the Redis password; the passwords reach the app only inside the URLs", () => {
    for (const name of ['api', 'worker', 'scheduler']) {
      const env = services[name].environment as Record<string, string>;
      const db = new URL(interpolate(env.DATABASE_URL));
      expect(db.username).toBe(services.postgres.environment.ONCEFLOW_DB_USER);
      expect(db.username).not.toBe(services.postgres.environment.POSTGRES_USER);
      expect(db.password).toBe(dotenv.ONCEFLOW_DB_PASSWORD);
      expect(new URL(interpolate(env.REDIS_URL)).password).toBe(dotenv.REDIS_PASSWORD);
      // env_file brings .env in whole: the copies are blanked.
      expect(services[name].env_file).toBe('.env');
      expect([env.POSTGRES_PASSWORD, env.ONCEFLOW_DB_PASSWORD, env.REDIS_PASSWORD]).toEqual(['', '', '']);
    }
  });

  it('creates the app role when Postgres is initialised, from a script that exists and is executable', () => {
    const mounts = services.postgres.volumes as string[];
    const init = mounts
      .map((m) => m.split(':'))
      .find(([, target]) => target.startsWith('/docker-entrypoint-initdb.d/'));
    expect(init).toBeDefined();
    expect(() => accessSync(join(ROOT, init![0]), constants.X_OK)).not.toThrow();
    expect(interpolate(services.postgres.environment.ONCEFLOW_DB_PASSWORD)).toBe(dotenv.ONCEFLOW_DB_PASSWORD);
  });

  it('makes Redis require the password the app is given', () => {
    const command = (services.redis.command as string[]).map(interpolate);
    expect(command[command.indexOf('--requirepass') + 1]).toBe(dotenv.REDIS_PASSWORD);
    expect(interpolate(services.redis.environment.REDISCLI_AUTH)).toBe(dotenv.REDIS_PASSWORD);
  });
});

describe('Kubernetes manifests (k8s/)', () => {
  const kustomization = load(read('k8s/kustomization.yaml')) as Obj;
  const resources = kustomization.resources as string[];
  const objects = resources.flatMap((file) => yamlDocs('k8s', file));
  const deployments = objects.filter((o) => o.kind === 'Deployment');
  const byComponent = (c: string) =>
    deployments.find((d) => d.spec.template.metadata.labels['app.kubernetes.io/component'] === c)!;
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy');

  it('lists every manifest but the Secret placeholders, and every one parses', () => {
    const files = readdirSync(join(ROOT, 'k8s')).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    expect([...resources].sort()).toEqual(files.filter((f) => f !== 'secret.example.yaml').sort());
    for (const f of readdirSync(join(ROOT, 'k8s', 'optional')))
      expect(yamlDocs('k8s', 'optional', f).length).toBeGreaterThan(0);
    expect(deployments.map((d) => d.spec.template.metadata.labels['app.kubernetes.io/component']).sort()).toEqual([
      'api',
      'scheduler',
      'worker',
    ]);
  });

  it.each(['api', 'worker', 'scheduler'])(
    '%s: no service-account token, seccomp RuntimeDefault, read-only root with /tmp as a volume',
    (c) => {
      const pod = byComponent(c).spec.template.spec;
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.securityContext.seccompProfile).toEqual({ type: 'RuntimeDefault' });
      expect(pod.hostNetwork ?? false).toBe(false);
      expect(pod.hostPID ?? false).toBe(false);
      for (const container of pod.containers) {
        expect(container.securityContext.allowPrivilegeEscalation).toBe(false);
        expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
        expect(container.securityContext.privileged ?? false).toBe(false);
        expect(container.securityContext.capabilities.drop).toEqual(['ALL']);
        expect(container.volumeMounts.map((m: Obj) => m.mountPath)).toContain('/tmp');
      }
    },
  );

  it.each(['api', 'scheduler'])('%s runs as the non-root node user with no capability', (c) => {
    const pod = byComponent(c).spec.template.spec;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    for (const container of pod.containers) expect(container.securityContext.capabilities.add).toBeUndefined();
  });

  it(`worker runs as root with exactly the capabilities the switch to ${RUN_USER} needs`, () => {
    const pod = byComponent('worker').spec.template.spec;
    expect(pod.securityContext.runAsUser).toBe(0);
    const [container] = pod.containers;
    expect([...container.securityContext.capabilities.add].sort()).toEqual(WORKER_CAPS);
    expect(container.env).toContainEqual({ name: 'RUN_AS_USER', value: RUN_USER });
  });

  const selects = (policy: Obj, labels: Record<string, string>) => {
    const sel = policy.spec.podSelector;
    const byLabel = Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
    const byExpr = (sel.matchExpressions ?? []).every(
      (e: Obj) => e.operator === 'In' && e.values.includes(labels[e.key]),
    );
    return byLabel && byExpr;
  };
  const egressPorts = (policy: Obj) =>
    policy.spec.egress.flatMap((rule: Obj) => rule.ports.map((p: Obj) => p.port)).sort((a: number, b: number) => a - b);

  it("limits every pod's egress, and no egress rule is open on every port", () => {
    for (const d of deployments) {
      const mine = policies.filter((p) => selects(p, d.spec.template.metadata.labels));
      expect(mine).toHaveLength(1);
      expect(mine[0].spec.policyTypes).toContain('Egress');
      for (const rule of mine[0].spec.egress) expect(rule.ports?.length).toBeGreaterThan(0);
    }
  });

  it('lets workers reach DNS, Postgres, Redis and public HTTPS (never cloud metadata); API and scheduler no HTTPS', () => {
    const worker = policies.find((p) => selects(p, byComponent('worker').spec.template.metadata.labels))!;
    expect(egressPorts(worker)).toEqual([53, 53, 443, 5432, 6379]);
    const https = worker.spec.egress.find((r: Obj) => r.ports.some((p: Obj) => p.port === 443));
    expect(https.to[0].ipBlock.except).toContain('169.254.0.0/16');
    const api = policies.find((p) => selects(p, byComponent('api').spec.template.metadata.labels))!;
    expect(egressPorts(api)).toEqual([53, 53, 5432, 6379]);
  });

  it(`the optional per-uid firewall targets the worker and ${RUN_USER}'s uid`, () => {
    const [patch] = yamlDocs('k8s', 'optional', 'worker-egress-by-uid.yaml');
    expect(patch).toMatchObject({ kind: 'Deployment', metadata: { name: byComponent('worker').metadata.name } });
    const [init] = patch.spec.template.spec.initContainers;
    expect(init.env).toContainEqual({ name: 'RUN_UID', value: String(RUN_UID) });
    expect(init.securityContext.capabilities.add).toEqual(['NET_ADMIN', 'NET_RAW']);
  });
});
