#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL cluster on 127.0.0.1 for the test suite.
#   scripts/test-postgres.sh start DIR [PORT]   prints the ERT_TEST_PG_URL to use
#   scripts/test-postgres.sh stop DIR
# The cluster skips fsync (a test database need not survive a crash); with ERT_PG_FSYNC=on it
# syncs every commit as a production server does (for benchmarks of durable claims).
# initdb and postgres refuse to run as root, so as root they run as the postgres user.
set -euo pipefail
cmd=${1:?start|stop}; dir=${2:?data directory}; port=${3:-55432}
initdb_path=$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)
[ -n "$initdb_path" ] || { echo "test-postgres: no PostgreSQL server found (apt-get install postgresql)" >&2; exit 1; }
bin=$(dirname "$(readlink -f "$initdb_path")")
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    as_pg "'$bin/initdb' -D '$dir' -U postgres --auth=trust -E UTF8" >/dev/null
    sync=${ERT_PG_FSYNC:-off}
    [ "$sync" = on ] || [ "$sync" = off ] || { echo "test-postgres: ERT_PG_FSYNC must be on or off, got $sync" >&2; exit 2; }
    as_pg "'$bin/pg_ctl' -D '$dir' -l '$dir/server.log' -w -o \"-h 127.0.0.1 -p $port -k '$dir' -c max_connections=300 -c fsync=$sync -c synchronous_commit=$sync\" start" >/dev/null
    as_pg "'$bin/psql' -h 127.0.0.1 -p $port -U postgres -qc 'CREATE DATABASE ert_test'" >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/ert_test"
    ;;
  stop)
    as_pg "'$bin/pg_ctl' -D '$dir' -m fast stop" >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2 ;;
esac
