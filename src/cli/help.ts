// The text of --help, for the tool and for each command, with examples.

const CONNECTION = `Connecting (as etcdctl):
  --endpoints URLS      etcd endpoints, comma-separated (default: $ETCDCTL_ENDPOINTS, else 127.0.0.1:2379)
  --api v3|v2           etcd API: v3 through the etcd3 client (default), v2 through node-etcd
  --cacert FILE         CA certificate to verify etcd's TLS certificate
  --cert FILE           client certificate for TLS (with --key)
  --key FILE            private key of the client certificate
  --user NAME[:PW]      user for etcd authentication
  --password PW         its password, if not given in --user
  --backend etcd|nats|postgres|redis   store (default etcd)

On NATS JetStream KV (--backend nats, as the nats tool):
  --server URLS         NATS servers, comma-separated (default: $NATS_URL, else nats://127.0.0.1:4222)
  --bucket NAME         the KV bucket; its TTL (max_age) is the members' TTL, so
                        --ttl may be left out and must match it if given
  --tlsca FILE          CA certificate to verify the server's TLS certificate
  --tlscert FILE        client certificate for TLS (with --tlskey)
  --tlskey FILE         private key of the client certificate
  --user NAME, --password PW   user and password

On PostgreSQL (--backend postgres) and Redis (--backend redis):
  --url URL             postgres://user:pw@host:5432/db (default: $DATABASE_URL), or
                        redis://user:pw@host:6379 (default: $REDIS_URL, else redis://127.0.0.1:6379)
  --table NAME          PostgreSQL: the table of lease rows (default etcd_leader_elections),
                        made if missing

Output:
  --json                JSON lines instead of readable lines
  --quiet               no state changes on stderr
  -h, --help            this help`;

export const TOOL_HELP = `etcd-leader: leader election from the command line, on etcd, NATS JetStream KV, PostgreSQL or Redis.

Usage:
  etcd-leader run KEY [flags] [--] COMMAND [ARGS...]   run COMMAND only while this member leads KEY
  etcd-leader run KEY --on-elected CMD --on-unelected CMD   run hooks when leadership starts and ends
  etcd-leader who KEY [flags]                           print who leads KEY (exit 3 if nobody)
  etcd-leader watch KEY [flags]                         print every change of leader of KEY

'etcd-leader COMMAND --help' describes each command's flags.

Exit codes: 0 ok; the command's own code (run); 3 nobody leads (who); 64 bad usage;
69 store unavailable (the server cannot be reached, or the NATS bucket is missing); 70 internal error; 75 the on-unelected hook failed;
126 command not executable; 127 command not found.

${CONNECTION}`;

export const RUN_HELP = `Usage: etcd-leader run KEY [flags] [--] COMMAND [ARGS...]

Joins the election at KEY and runs COMMAND only while this member leads. When
leadership ends, COMMAND gets --signal (SIGTERM) at once, no later than the
member's lease deadline, and SIGKILL after --grace; it starts again in the next
term. If COMMAND exits by itself, the member leaves and etcd-leader exits with
COMMAND's code (--restart: start it again while leading). SIGINT, SIGTERM or
SIGHUP stops COMMAND, leaves the election and exits 0 (Signals, below).
COMMAND gets ETCD_LEADER_TOKEN (the fencing token), ETCD_LEADER_KEY and
ETCD_LEADER_NAME in its environment; its stdout and stderr are etcd-leader's.
State changes go to stderr. A helper process stops COMMAND at the lease
deadline even if etcd-leader itself is killed or frozen by then.

Flags:
  --name NAME           member name shown to others (default: HOSTNAME-PID)
  --ttl SECONDS         membership lifetime without renewal (default 10; NATS: the bucket's)
  --signal SIG          signal that stops COMMAND (default SIGTERM)
  --grace SECONDS       time COMMAND gets to stop before SIGKILL (default 5)
  --restart             start COMMAND again if it exits while this member leads
  --on-elected CMD      shell command run on election, before COMMAND
  --on-unelected CMD    shell command run when leadership ends, after COMMAND stopped
  --hook-retries N      retries of a failed hook, with back-off (default 3)
  --hook-timeout SECONDS  a hook running longer fails (default 60)
  --error-delay SECONDS   after a failed --on-elected hook, stay out of the
                        election this long before rejoining (default 10)
  --verbose             also report every renewal and the lease deadline it moved
  --health-addr HOST:PORT   serve health probes there: GET /livez (200 unless
                        this member has failed to reach the store, with no
                        success in between, for --unhealthy-after) and
                        GET /readyz (200 while running; with --readiness
                        leader, only while leading), 503 otherwise, with a
                        JSON body saying why (port 0: any free port, reported)
  --readiness member|leader   who /readyz calls ready (default member)
  --metrics-addr HOST:PORT   serve Prometheus metrics at /metrics there
                        (is_leader, fencing_token, renewals, ...; needs
                        prom-client installed); may be --health-addr's address
  --unhealthy-after SECONDS   /livez fails after this long failing (default 60,
                        or 3 TTLs if longer)
  --watch-rearm SECONDS   etcd: ask a watch again on a new connection after this
                        long, which catches a connection that died silently
                        (default 30; v2's long polls, v3 relies on gRPC keepalive)
  --go-members          NATS: Go nats-kv-leader-elect members may take part; a
                        winner says it leads only 0.75 x TTL + 5.2 s after the
                        key's previous write, when no Go leader can still
                        believe it leads

Signals:
  SIGINT, SIGTERM, SIGHUP   stop COMMAND (or a running --on-elected hook) as at
                        the end of a term, run --on-unelected, leave the
                        election (the next member is elected at once), and
                        exit 0. SIGHUP is what a closing terminal or a dropped
                        ssh session sends.
  SIGUSR1               the leader yields: COMMAND is stopped as at the end
                        of a term, the next member takes over at once, and
                        this one stays in the election at the back of the
                        line (its command starts again in its next term)
  a second one          exit at once, with 128 + its number, without leaving:
                        the helper process stops what still runs, and the next
                        member is elected once the TTL has run out
  SIGKILL, SIGSTOP      (and the OOM killer, a frozen VM) cannot be caught: the
                        helper process stops COMMAND when etcd-leader dies, or
                        at the lease deadline while it is frozen; the next
                        member is elected once the TTL has run out
  COMMAND's group       COMMAND and each hook run in a process group of their
                        own, so Ctrl-C reaches etcd-leader only. --signal goes
                        to the whole group, SIGKILL after --grace to whatever
                        of it still runs. COMMAND (or a hook) counts as running
                        until no process of its group is left, even after its
                        first process exited: a daemon it forked is stopped at
                        the term's end, and a hook's background jobs are part
                        of the hook. A process that leaves the group (setsid)
                        is not followed.

Examples:
  # one copy of a worker across all hosts
  etcd-leader run /services/mailer/leader -- node mailer.js
  # a cron job that runs on one host of many
  etcd-leader run --ttl 5 /cron/nightly-report -- ./report.sh
  # on NATS, in a bucket made with: nats kv add --ttl 10s leaders
  etcd-leader run --backend nats --server nats://10.0.0.1:4222 --bucket leaders mailer -- node mailer.js
  # on PostgreSQL or Redis
  DATABASE_URL=postgres://app@db/app etcd-leader run --backend postgres mailer -- node mailer.js
  etcd-leader run --backend redis --url redis://cache:6379 mailer -- node mailer.js
  # elector-style hooks
  etcd-leader run /vip/leader --on-elected 'ip addr add 10.0.0.5/24 dev eth0' \\
      --on-unelected 'ip addr del 10.0.0.5/24 dev eth0'

${CONNECTION}`;

export const WHO_HELP = `Usage: etcd-leader who KEY [flags]

Prints the leader of the election at KEY and its fencing token, once, and exits
0; prints "nobody leads" and exits 3 when nobody does. 'status' is the same.

  --all                 every member in line, the leader first, each with its
                        token (--json: {"key","scope","members"}); on NATS KV,
                        PostgreSQL and Redis, where members that do not lead
                        hold nothing in the store, the leader alone (scope "leader")

Examples:
  etcd-leader who /services/mailer/leader
  etcd-leader who --all /services/mailer/leader
  etcd-leader who --json --endpoints https://10.0.0.1:2379 --cacert ca.pem /services/mailer/leader
  etcd-leader who --backend nats --bucket leaders mailer

${CONNECTION}`;

export const WATCH_HELP = `Usage: etcd-leader watch KEY [flags]

Prints the leader of the election at KEY, then every change of leader, one line
each, until interrupted. Never writes to the store.

Examples:
  etcd-leader watch /services/mailer/leader
  etcd-leader watch --json /services/mailer/leader | jq .leader.name

${CONNECTION}`;
