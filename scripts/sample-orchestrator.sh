#!/bin/sh
# The bundled sample orchestrator: a stand-in for an AI agent working a requirement, built of
# `onceflow step`s so that a retried attempt resumes after the last finished step (docs/steps.md).
# It reads the run only from environment variables (never from its command line) and writes into
# the workspace it runs in. Set ORCHESTRATOR_COMMAND to use yours.
#
#   prepare       copies the requirement into the workspace
#   plan          asks the model for a plan through the worker's caching proxy ($OPENAI_BASE_URL)
#                 when OPENAI_API_KEY reaches the command (ORCHESTRATOR_ENV_PASSTHROUGH=OPENAI_API_KEY);
#                 without a key it writes a placeholder plan
#   write-result  writes onceflow-result-<run id>.md
#   report        prints a summary
# SAMPLE_STEP_PAUSE=S (in the command text) makes each step take S seconds longer: the demo kills a
# worker in the middle.
set -eu
pause="${SAMPLE_STEP_PAUSE:-0}"
export SAMPLE_STEP_PAUSE="$pause"
out="onceflow-result-${RUN_ID}.md"

onceflow step prepare -- sh -c '
  sleep "$SAMPLE_STEP_PAUSE"
  if [ -n "${RUN_REQUIREMENT_FILE:-}" ]; then cp "$RUN_REQUIREMENT_FILE" requirement.md; else printf "%s\n" "$RUN_REQUIREMENT" > requirement.md; fi
  echo "prepared requirement.md ($(wc -c < requirement.md) bytes)"'

onceflow step plan -- node -e '
  const fs = require("node:fs");
  const pause = Number(process.env.SAMPLE_STEP_PAUSE || 0) * 1000;
  const requirement = fs.readFileSync("requirement.md", "utf8");
  const write = (text) => { fs.writeFileSync("plan.md", text); console.log("plan.md written (" + text.length + " characters)"); };
  setTimeout(async () => {
    if (!process.env.OPENAI_API_KEY) return write("# Plan\n\n(no OPENAI_API_KEY reached the command: no model was asked)\n");
    const res = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY },
      body: JSON.stringify({ model: process.env.SAMPLE_MODEL || "gpt-4o-mini", messages: [
        { role: "system", content: "You plan software changes. Answer with a short numbered plan." },
        { role: "user", content: requirement } ] }),
    });
    if (!res.ok) { console.error("plan: the model answered " + res.status + ": " + (await res.text()).slice(0, 300)); process.exit(75); }
    const answer = await res.json();
    write("# Plan (" + (res.headers.get("x-onceflow-cache") || "direct") + ")\n\n" + answer.choices[0].message.content + "\n");
  }, pause);'

onceflow step write-result -- sh -c '
  sleep "$SAMPLE_STEP_PAUSE"
  {
    printf "# Run %s (attempt %s, fencing token %s)\n\n" "$RUN_ID" "$RUN_ATTEMPT" "$RUN_FENCING_TOKEN"
    printf "Project: %s\n\n## Requirement\n\n" "$PROJECT_NAME"
    cat requirement.md
    printf "\n"
    cat plan.md
    printf "\nFinished at %s\n" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } > "$1.tmp"
  mv "$1.tmp" "$1"
  echo "wrote $(pwd)/$1"' sh "$out"

onceflow step report -- sh -c 'sleep "$SAMPLE_STEP_PAUSE"; echo "sample orchestrator: run $RUN_ID done in attempt $RUN_ATTEMPT"'
