#!/bin/sh
# The bundled sample orchestrator: a stand-in for an AI agent working a requirement.
# It reads the run only from environment variables (never from its command line), writes a
# result file into the workspace it runs in, and exits 0. Set ORCHESTRATOR_COMMAND to use yours.
set -eu
out="onceflow-result-${RUN_ID}.md"
{
  printf '# Run %s (attempt %s, fencing token %s)\n\n' "$RUN_ID" "$RUN_ATTEMPT" "$RUN_FENCING_TOKEN"
  printf 'Project: %s\n\n## Requirement\n\n' "$PROJECT_NAME"
  printf '%s\n' "$RUN_REQUIREMENT"
  printf '\nFinished at %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "sample orchestrator: wrote $(pwd)/$out"
