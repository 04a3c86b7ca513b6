#!/usr/bin/env bash
# A private PostgreSQL cluster for the tests: initdb in a fresh temp directory, a free port on
# 127.0.0.1, password authentication (a random password), and removal afterwards. Never touches a
# system cluster.
#
#   tests/pg/cluster.sh start STATE_DIR   starts one; writes STATE_DIR/url (the superuser's URL,
#                                         database "postgres") and STATE_DIR/data_dir
#   tests/pg/cluster.sh restart STATE_DIR restarts it as a crash does (pg_ctl restart -m immediate:
#                                         no shutdown checkpoint, recovery from the WAL on start)
#   tests/pg/cluster.sh stop STATE_DIR    stops it (immediate) and removes its files
#
# AGENTPAY_PG_SERVER_OPTIONS, if set, goes to the server's command line on start (e.g.
# "-c shared_preload_libraries=pg_stat_statements": bench/postgres_vs_sqlite.py --statements).
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to the unprivileged system user
# "postgres" (Debian's packages create it) and runs as that user (runuser); otherwise as the caller.
# The data directory is made under $TMPDIR (default /tmp), where that user can reach it.
set -euo pipefail

usage() {
  echo "usage: $0 start|restart|stop STATE_DIR" >&2
  exit 2
}
(($# == 2)) || usage
action=$1
state=$2

bindir=""
for candidate in "$(pg_config --bindir 2>/dev/null || true)" /usr/lib/postgresql/*/bin; do
  if [[ -n $candidate && -x $candidate/initdb && -x $candidate/pg_ctl ]]; then
    bindir=$candidate
    break
  fi
done
if [[ -z $bindir ]]; then
  echo "cluster.sh: no PostgreSQL server binaries (initdb, pg_ctl); run scripts/bootstrap.sh" >&2
  exit 1
fi

as_owner=()
if ((EUID == 0)); then
  if ! id postgres >/dev/null 2>&1; then
    echo "cluster.sh: running as root needs the unprivileged user 'postgres' (Debian's" \
      "postgresql package creates it)" >&2
    exit 1
  fi
  as_owner=(runuser -u postgres --)
fi

stop_cluster() {
  [[ -f $state/data_dir ]] || return 0
  local data
  data=$(cat "$state/data_dir")
  if [[ -f $data/data/postmaster.pid ]]; then
    "${as_owner[@]}" "$bindir/pg_ctl" -D "$data/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  # Only a directory this script made (its name says so) is removed.
  [[ $data == */agentpay-pg.* ]] && rm -rf -- "$data"
  rm -f -- "$state/data_dir" "$state/url"
}

case $action in
  start)
    mkdir -p "$state"
    stop_cluster
    data=$(mktemp -d "${TMPDIR:-/tmp}/agentpay-pg.XXXXXX")
    echo "$data" >"$state/data_dir"
    chmod 700 "$data"
    password=$(openssl rand -hex 16)
    (umask 077 && echo "$password" >"$data/pwfile")
    ((EUID == 0)) && chown -R postgres: "$data"
    "${as_owner[@]}" "$bindir/initdb" -D "$data/data" -U agentpay --pwfile="$data/pwfile" \
      --auth=scram-sha-256 -E UTF8 --no-locale >"$data/initdb.log" 2>&1 || {
      cat "$data/initdb.log" >&2
      exit 1
    }
    rm -f -- "$data/pwfile"
    # Below the kernel's ephemeral range (tests/testports.py): while the server is down for a
    # restart, a reconnecting client's own source port could otherwise take its port.
    port=$(python3 "$(dirname "${BASH_SOURCE[0]}")/../testports.py")
    # Sockets stay in the data directory; max_connections leaves room for several gateways, their
    # readers and the tests' own connections. Checkpoints every 30 s or 64 MB of WAL: a restart
    # as a crash replays the WAL written since the last one, and with the defaults (5 min, 1 GB)
    # the suites before the restart test can leave more than a busy 2-core machine replays in 60 s.
    if ! "${as_owner[@]}" "$bindir/pg_ctl" -D "$data/data" -l "$data/server.log" -w -t 60 \
      -o "-p $port -c listen_addresses=127.0.0.1 -k $data -c max_connections=300 -c checkpoint_timeout=30s -c max_wal_size=64MB ${AGENTPAY_PG_SERVER_OPTIONS:-}" \
      start >/dev/null; then
      cat "$data/server.log" >&2
      exit 1
    fi
    echo "postgresql://agentpay:$password@127.0.0.1:$port/postgres" >"$state/url"
    echo "cluster.sh: PostgreSQL on 127.0.0.1:$port, data in $data"
    ;;
  restart)
    data=$(cat "$state/data_dir")
    if ! "${as_owner[@]}" "$bindir/pg_ctl" -D "$data/data" -l "$data/server.log" -m immediate -w \
      -t 120 restart >/dev/null; then
      tail -n 30 "$data/server.log" >&2
      exit 1
    fi
    ;;
  stop)
    stop_cluster
    ;;
  *) usage ;;
esac
