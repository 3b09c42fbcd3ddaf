#!/bin/sh
# Test orchestrator: the outside witness of executions. Appends one line when it starts and one
# when it finishes to the file given as $1 (O_APPEND writes of short lines do not interleave).
# Behaviour comes from the run's requirement text (data, matched as patterns, never evaluated):
#   sleep=N      sleep N seconds (N from 0.1 to 9.9, or a whole number)
#   transient=N  exit 75 while RUN_ATTEMPT <= N
#   fail         exit 3
log="$1"
now() { date +%s%N; }
echo "start $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now)" >> "$log"
case "$RUN_REQUIREMENT" in
  *sleep=*)
    s=${RUN_REQUIREMENT#*sleep=}; s=${s%% *}
    case "$s" in *[!0-9.]*|'') s=0 ;; esac
    sleep "$s" ;;
esac
case "$RUN_REQUIREMENT" in
  *transient=*)
    n=${RUN_REQUIREMENT#*transient=}; n=${n%% *}
    case "$n" in *[!0-9]*|'') n=0 ;; esac
    if [ "$RUN_ATTEMPT" -le "$n" ]; then echo "transient $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now)" >> "$log"; exit 75; fi ;;
esac
case "$RUN_REQUIREMENT" in
  *fail*) echo "fail $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now)" >> "$log"; exit 3 ;;
esac
echo "done $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now)" >> "$log"
