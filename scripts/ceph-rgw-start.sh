#!/usr/bin/env bash
# Start a throw-away single-node Ceph cluster (1 monitor, 1 memstore OSD, 1 radosgw) on loopback,
# entirely inside one directory, without systemd. Used by scripts/test for the integration tests:
# Ceph RGW is a real S3 server whose compare-and-swap is atomic under races (moto's is not).
#
# Needs Debian's packages: radosgw ceph-mon ceph-osd ceph-common (scripts/test installs them).
#
# Environment (all optional):
#   CEPH_RGW_DIR  working directory (default: new mktemp dir)   MON_PORT (3300)  RGW_PORT (7480)
#   S3_ACCESS_KEY / S3_SECRET_KEY                               keys of the S3 user created
#
# Prints `export ...` lines (endpoint, keys; also saved to $CEPH_RGW_DIR/env). Daemon PIDs go to
# $CEPH_RGW_DIR/pids; stop with scripts/ceph-rgw-stop.sh "$CEPH_RGW_DIR".
set -euo pipefail

DIR=${CEPH_RGW_DIR:-$(mktemp -d -t ceph-rgw.XXXXXX)}
MON_PORT=${MON_PORT:-3300}
RGW_PORT=${RGW_PORT:-7480}
S3_ACCESS_KEY=${S3_ACCESS_KEY:-LGHTESTACCESSKEY0000}
S3_SECRET_KEY=${S3_SECRET_KEY:-lghtestsecretkey00000000000000000000000000}

mkdir -p "$DIR"/{run,log,mon-a,osd-0,rgw}
DIR=$(cd "$DIR" && pwd)
: > "$DIR/pids"
export CEPH_CONF="$DIR/ceph.conf"
FSID=$(cat /proc/sys/kernel/random/uuid)
OSD_UUID=$(cat /proc/sys/kernel/random/uuid)

log() { echo "[ceph-rgw $(date +%T)] $*" >&2; }

# On failure: kill what was started (by PID), keep the logs for inspection.
on_exit() {
  local rc=$?
  if ((rc != 0)); then
    log "start-up failed (rc=$rc); logs kept in $DIR/log"
    tac "$DIR/pids" | while read -r _ pid; do kill -KILL "$pid" 2>/dev/null || true; done
  fi
}
trap on_exit EXIT

wait_for() { # seconds, command...
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || { log "timed out waiting for: $*"; return 1; }
    sleep 0.3
  done
}
http_ok() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1"; }
port_busy() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1" 2>/dev/null; }
for p in "$MON_PORT" "$RGW_PORT"; do
  if port_busy "$p"; then echo "port $p on 127.0.0.1 is already in use" >&2; exit 1; fi
done

cat > "$CEPH_CONF" <<CONF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
pid file = $DIR/run/\$name.pid
mon data = $DIR/mon-\$id
osd data = $DIR/osd-\$id
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 4294967296
mon data avail warn = 1
mon data avail crit = 0
# Commit monitor changes quickly: start-up drops from ~19 s to ~5 s.
paxos propose interval = 0.05
paxos min wait = 0.01

[client.rgw.a]
rgw data = $DIR/rgw
# tcp_nodelay: without it a small GET takes ~48 ms instead of ~5 ms.
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw thread pool size = 64
rgw dns name = localhost
CONF

ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$DIR/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
ceph-authtool "$DIR/keyring" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' >/dev/null
ceph-authtool "$DIR/keyring" --gen-key -n client.rgw.a --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null

log "starting monitor on 127.0.0.1:$MON_PORT"
monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
ceph-mon --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring"
ceph-mon -f -i a >"$DIR/log/mon.a.stdout" 2>&1 &
echo "mon.a $!" >> "$DIR/pids"
wait_for 60 ceph --connect-timeout 5 mon stat

OSD_ID=$(ceph osd new "$OSD_UUID")
ceph-osd -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >"$DIR/log/osd.mkfs.stdout" 2>&1
ceph-osd -f -i "$OSD_ID" >"$DIR/log/osd.$OSD_ID.stdout" 2>&1 &
echo "osd.$OSD_ID $!" >> "$DIR/pids"
osd_up() { ceph osd dump --format json | python3 -c \
  'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["osds"] and d["osds"][0]["up"]==1 and d["osds"][0]["in"]==1 else 1)'; }
wait_for 120 osd_up
log "osd.$OSD_ID up"

radosgw -f -n client.rgw.a >"$DIR/log/rgw.a.stdout" 2>&1 &
echo "rgw.a $!" >> "$DIR/pids"
wait_for 180 http_ok "http://127.0.0.1:$RGW_PORT/"
radosgw-admin -n client.admin user create --uid=tester --display-name=tester \
  --access-key="$S3_ACCESS_KEY" --secret-key="$S3_SECRET_KEY" >"$DIR/log/user-create.json"
log "radosgw answering on http://127.0.0.1:$RGW_PORT"

cat > "$DIR/env" <<ENV
export CEPH_RGW_DIR=$DIR
export S3_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_DEFAULT_REGION=us-east-1
ENV
cat "$DIR/env"
