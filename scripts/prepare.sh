#!/usr/bin/env bash
# Installs what the tests and the demo need on a Debian or Ubuntu machine with
# Node 20+, then builds: etcd (server and etcdctl), nats-server, redis-server
# and PostgreSQL from apt when missing, the npm dependencies when missing or stale, and dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# Debian puts nats-server in /usr/sbin, often not on a non-root PATH; the test
# kit (test/kit/nats-server.ts) looks there too.
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
# PostgreSQL's server programs (initdb, postgres) live in
# /usr/lib/postgresql/<version>/bin, off PATH; the test kit
# (test/kit/postgres-server.ts) looks there.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)

if ((${#missing[@]})); then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "installing ${missing[*]} with apt-get" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing: ${missing[*]}. Install etcd 3.4 or later (the etcd server and etcdctl), nats-server 2.9 or later, redis-server 7, PostgreSQL 15 (initdb and postgres) and openssl, put them on PATH (or set NATS_SERVER_BIN to nats-server's path), and run this again." >&2
    exit 1
  fi
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

node scripts/build.mjs
