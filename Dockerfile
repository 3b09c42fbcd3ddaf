# syntax=docker/dockerfile:1
# One image for every role; APP_ROLE=api|worker|scheduler|all picks what a container runs.

# --- build: full dev toolchain, compile, then drop dev dependencies ---------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app
# Manifests first so the dependency layer is cached until they change.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx nest build && npm prune --omit=dev --no-audit --no-fund

# --- runtime ----------------------------------------------------------------------------------
FROM node:20-bookworm-slim
# tini as PID 1: forwards SIGTERM to node (graceful shutdown) and reaps orphans an orchestrator
# command leaves behind; node itself does not reap processes re-parented to it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    PORT=3000 \
    WORKSPACE_ROOT=/app/workspaces
WORKDIR /app
# Code stays owned by root, read-only to the app user; only the workspace root is writable.
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The bundled sample orchestrator (the default ORCHESTRATOR_COMMAND resolves it from dist/).
COPY --from=build /app/scripts ./scripts
RUN mkdir -p /app/workspaces && chown node:node /app/workspaces
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/src/main.js"]
