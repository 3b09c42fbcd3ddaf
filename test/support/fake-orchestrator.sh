#!/bin/sh
# Test orchestrator: the outside witness of executions. Appends one line when it starts and one
# when it finishes to the file given as $1 (O_APPEND writes of short lines do not interleave):
#   <kind> <run id> <attempt> <fencing token> <pid> <wall clock ns> [key=value ...]
# kind is start, done, transient or fail; readers take the six positional fields and may ignore
# the key=value ones, so new kinds and keys can be added without breaking them. Every line carries
#   ppid=<parent pid>  worker=<pid of the nearest node ancestor: the worker that spawned it, or 0>
# both read from /proc when the command starts (the worker is found by the OS's parent links, not
# by anything the app says). With a directory as $2, the command also holds an exclusive flock on
# <dir>/<run>.<token>.<pid> from before its start line until it exits (children included): a
# waiter on that lock learns when the execution really ended, killed or not (start line: lock=...).
# Behaviour comes from the run's requirement text (data, matched as patterns, never evaluated):
#   steps=N      a multi-step run: steps-orchestrator.sh (beside this file) does the work between the
#                start line and the end line, its steps appending to the file given as $3; exit 0 →
#                done, 75 → transient, anything else → fail (code=N)
#   sleep=N      sleep N seconds (N from 0.1 to 9.9, or a whole number)
#   transient=N  exit 75 while RUN_ATTEMPT <= N
#   fail         exit 3
log="$1"
lockdir="$2"
stepslog="$3"
here=$(dirname "$0")
now() { date +%s%N; }

# Parent links up to the worker: stat is "pid (comm) state ppid ..."; comm may hold spaces.
parent=0
worker=0
p=$$
i=0
while [ "$i" -lt 16 ]; do
  read -r stat <"/proc/$p/stat" 2>/dev/null || break
  set -- ${stat##*) }
  [ "$p" = "$$" ] && parent=$2
  [ "$2" -gt 1 ] 2>/dev/null || break
  read -r comm <"/proc/$2/comm" 2>/dev/null || break
  case "$comm" in node*) worker=$2; break ;; esac
  p=$2
  i=$((i + 1))
done
who="ppid=$parent worker=$worker"

lock=''
if [ -n "$lockdir" ]; then
  lock="$lockdir/$RUN_ID.$RUN_FENCING_TOKEN.$$"
  exec 9>>"$lock"
  flock -x 9
  lock=" lock=$lock"
fi

echo "start $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who$lock" >> "$log"
case "$RUN_REQUIREMENT" in
  *steps=*)
    sh "$here/steps-orchestrator.sh" "${stepslog:-/dev/null}"; rc=$?
    case "$rc" in
      0) echo "done $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who" >> "$log" ;;
      75) echo "transient $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who" >> "$log" ;;
      *) echo "fail $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who code=$rc" >> "$log" ;;
    esac
    exit "$rc" ;;
esac
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
    if [ "$RUN_ATTEMPT" -le "$n" ]; then echo "transient $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who" >> "$log"; exit 75; fi ;;
esac
case "$RUN_REQUIREMENT" in
  *fail*) echo "fail $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who" >> "$log"; exit 3 ;;
esac
echo "done $RUN_ID $RUN_ATTEMPT $RUN_FENCING_TOKEN $$ $(now) $who" >> "$log"
