#!/bin/sh
# Test orchestrator built of `onceflow step`s: the outside witness of which steps really ran.
# $1 = the file it appends to (O_APPEND lines of one write each):
#   start|done|fail <run> <attempt> <token> <pid> <ns>          the command itself
#   stepbegin|effect <run> <attempt> <token> <pid> <ns> <step>   inside a step: its start, its effect
#                                                                (also as step=<step>, for key=value readers)
#   escaped <run> <attempt> <token> <pid> <ns> <exit code>       a detached process's late step call
# Behaviour comes from the requirement (data, matched as patterns, never evaluated):
#   steps=N        N steps s1..sN (default 4)
#   pace=S         each step sleeps S seconds before its effect (0.1 to 9.9, or whole)
#   slow=K         step sK sleeps 3 s (a step to kill or freeze a worker in)
#   failstep=K     step sK exits 75 (transient) on attempt 1, before its effect
#   llm            step s2 asks the LLM (OpenAI-style, through the worker's proxy) and records the answer
#   escape=S       on attempt 1, a detached process (own session: it survives the group kill)
#                  calls `onceflow step escaped` S seconds later; its step would append an effect line
log="$1"
here=$(dirname "$0")
now() { date +%s%N; }
field() { v=${RUN_REQUIREMENT#*"$1"=}; v=${v%% *}; case "$v" in *[!0-9.]*|'') v="$2" ;; esac; echo "$v"; }
echo "start $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now)" >> "$log"
n=4; s=0; esc=''; failstep=0; slow=0
case "$RUN_REQUIREMENT" in *steps=*) n=$(field steps 4) ;; esac
case "$RUN_REQUIREMENT" in *pace=*) s=$(field pace 0) ;; esac
case "$RUN_REQUIREMENT" in *escape=*) esc=$(field escape 1) ;; esac
case "$RUN_REQUIREMENT" in *failstep=*) failstep=$(field failstep 0) ;; esac
case "$RUN_REQUIREMENT" in *slow=*) slow=$(field slow 0) ;; esac
if [ -n "$esc" ] && [ "$RUN_ATTEMPT" = 1 ]; then
  setsid sh -c 'sleep "$2"; onceflow step escaped -- sh -c "echo \"effect $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN \$\$ \$(date +%s%N) escaped\" >> \"\$0\"" "$1"; rc=$?; echo "escaped $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(date +%s%N) $rc" >> "$1"' sh "$log" "$esc" </dev/null >/dev/null 2>&1 &
fi
i=1
while [ "$i" -le "$n" ]; do
  llm=''; fail=''; pause="$s"
  [ "$i" -eq "$slow" ] && pause=3
  case "$RUN_REQUIREMENT" in *llm*) [ "$i" -eq 2 ] && llm=1 ;; esac
  [ "$i" -eq "$failstep" ] && [ "$RUN_ATTEMPT" -le 1 ] && fail=1
  onceflow step "s$i" -- sh -c '
    echo "stepbegin $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(date +%s%N) $ONCEFLOW_STEP step=$ONCEFLOW_STEP" >> "$1"
    sleep "$2"
    [ -n "$5" ] && exit 75
    if [ -n "$4" ]; then node "$3/llm-call.js" openai "plan for $RUN_ID" > llm-answer.json || exit 1; cat llm-answer.json; fi
    echo "effect $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(date +%s%N) $ONCEFLOW_STEP step=$ONCEFLOW_STEP" >> "$1"
    echo "output of $ONCEFLOW_STEP ($ONCEFLOW_STEP_KEY)"' sh "$log" "$pause" "$here" "$llm" "$fail" || exit $?
  i=$((i + 1))
done
echo "done $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now)" >> "$log"
