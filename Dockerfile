# syntax=docker/dockerfile:1
# One image for every role; APP_ROLE=api|worker|scheduler|all picks what a container runs.
# Node 22 LTS at run time; the code itself also runs on Node >= 20.19 (package.json engines).

# --- build: full dev toolchain, compile, then drop dev dependencies ---------------------------
# Same Node as the runtime, so any native addon is built for the ABI that loads it.
FROM node:22-bookworm-slim AS build
WORKDIR /app
# Manifests first so the dependency layer is cached until they change.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx nest build && npm prune --omit=dev --no-audit --no-fund

# --- runtime ----------------------------------------------------------------------------------
FROM node:22-bookworm-slim
# tini as PID 1: forwards SIGTERM to node (graceful shutdown) and reaps orphans an orchestrator
# command leaves behind; node itself does not reap processes re-parented to it.
# onceflow-run (10001): the user orchestrator commands run as in a worker (RUN_AS_USER). No login
# shell, no home: nothing of the worker's (environment, /proc/<pid>/environ, files) is readable
# to it. Its uid is fixed because manifests name it (the optional egress rule in k8s/optional).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 onceflow-run \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin onceflow-run
ENV NODE_ENV=production \
    PORT=3000 \
    WORKSPACE_ROOT=/app/workspaces
WORKDIR /app
# Code stays owned by root, read-only to every user; only the workspace root is writable.
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The bundled sample orchestrator (the default ORCHESTRATOR_COMMAND resolves it from dist/).
COPY --from=build /app/scripts ./scripts
# The workspace root belongs to node (the API creates project and task directories in it) and is
# not writable by onceflow-run: a command owns its own workspace, never the root, so it cannot
# plant a symlink where another project's workspace will be created.
RUN mkdir -p /app/workspaces && chown node:node /app/workspaces && chmod 0755 /app/workspaces
# API and scheduler run as node with no capabilities. A worker runs as root with only the
# capabilities the user switch needs (see docker-compose.yml, k8s/worker.yaml and
# docs/operations-deploy.md), and the command as onceflow-run.
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# A bounded old generation: V8 otherwise grows the heap toward a limit sized from the host's memory,
# and an API process under intake load sat at ~230-290 MB RSS for a live heap of ~50 MB. A 16 MB
# young generation lets more of a request's objects die young (~8 % of the API's CPU per delivery
# against 4 MB): ~182 MB under the intake bench (docs/benchmarks.md). Same flags as npm start.
CMD ["node", "--max-old-space-size=512", "--max-semi-space-size=16", "dist/src/main.js"]
