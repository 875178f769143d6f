#!/usr/bin/env bash
# Stop the cluster started by scripts/ceph-rgw-start.sh: SIGTERM each daemon by the PID recorded in
# DIR/pids (radosgw, OSD, monitor: reverse start order), SIGKILL after STOP_TIMEOUT seconds, then
# delete DIR unless KEEP=1.   Usage: scripts/ceph-rgw-stop.sh DIR
set -uo pipefail
DIR=${1:?usage: ceph-rgw-stop.sh DIR}
STOP_TIMEOUT=${STOP_TIMEOUT:-20}
alive() { local st; st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z* ]]; }
[[ -f "$DIR/pids" ]] || { echo "no $DIR/pids" >&2; exit 1; }
tac "$DIR/pids" | while read -r name pid; do
  alive "$pid" || continue
  kill -TERM "$pid"
  for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then echo "$name ($pid) ignored SIGTERM; SIGKILL" >&2; kill -KILL "$pid"; fi
  echo "stopped $name ($pid)" >&2
done
[[ "${KEEP:-0}" == 1 ]] || rm -rf "$DIR"
