#!/usr/bin/env bash
# Starts or stops a throw-away PostgreSQL server from Debian's packages, for the CI's PostgreSQL
# suite and for benchmarks: trust auth, loopback only, its own data folder and port.
#   scripts/local-postgres.sh start DIR PORT   → prints the DATABASE_URL to use
#   scripts/local-postgres.sh stop DIR
# PG_EXTRA_OPTS adds server settings (the CI passes "-c fsync=off" since its data is thrown away;
# benchmarks keep the durable defaults).
set -euo pipefail
action=${1:?start|stop}
dir=${2:?data folder}
port=${3:-55432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || { echo "PostgreSQL is not installed (apt-get install -y postgresql)" >&2; exit 1; }
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$action" in
  start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
      chown postgres:postgres "$dir"
      runuser -u postgres -- test -x "$dir" ||
        { echo "user postgres cannot reach $dir: choose a folder whose parents are world-executable" >&2; exit 1; }
    fi
    if [ ! -f "$dir/PG_VERSION" ]; then
      as_postgres "$bin/initdb" -D "$dir" -U postgres -A trust -E UTF8 >/dev/null
    fi
    as_postgres "$bin/pg_ctl" -D "$dir" -w -l "$dir/server.log" \
      -o "-p $port -h 127.0.0.1 -k $dir -c max_connections=200 ${PG_EXTRA_OPTS:-}" start >/dev/null ||
      { echo "PostgreSQL did not start; its log:" >&2; tail -n 30 "$dir/server.log" >&2; exit 1; }
    as_postgres "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qtc \
      "SELECT 1 FROM pg_database WHERE datname = 'payments'" | grep -q 1 ||
      as_postgres "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres payments
    echo "postgres://postgres@127.0.0.1:$port/payments"
    ;;
  stop)
    as_postgres "$bin/pg_ctl" -D "$dir" -m fast stop >/dev/null || true
    ;;
  *) echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2 ;;
esac
