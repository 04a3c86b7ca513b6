#!/usr/bin/env python3
"""Paid wallet requests/s on PostgreSQL against SQLite, in one run.

Scenarios, each on a fresh store, the demo seller upstream (price 1), wrk -t1 with a new
Idempotency-Key per request (every request a new payment: key + hold committed, upstream call,
capture committed), each twice: one hot account (every request charges the same account) and
--accounts accounts (request n of wrk's thread charges account n mod count):
  sqlite   1 gateway on a SQLite file (the baseline)
  pg       1 gateway on a PostgreSQL database
  pg x3    3 gateways on one PostgreSQL database, behind nginx as the load balancer, with 3x the
           connections (--x3-connections): each gateway has the load one gateway has alone
PostgreSQL is a private cluster (tests/pg/cluster.sh) on this machine, fsync on, started for the run
and removed after. Prints requests/s per scenario and each as a ratio to sqlite with the same
accounts, and per paid request what travels to another machine better than requests/s: the CPU
microseconds of the gateways (all of them together), of PostgreSQL (every process of the cluster),
and of the seller, the database round trips per decision and the decisions per commit, and what
each store wrote to its WAL: on PostgreSQL the cluster's (pg_walinspect over the load's WAL:
bytes, records, rows inserted, updated, updated in place (HOT) and deleted, index entries), on
SQLite the gateway's (agentpay_store_wal_bytes_total); then the 3 gateways' CPU per paid request
over 1 gateway's. Exits 1 when 1 gateway on PostgreSQL is below
--floor (0.5) of SQLite, or a money check fails: every account's captured sum equals the gateways'
own count of 2xx paid answers x price, nothing stays held, and no answer was anything but 2xx.
With --statements N the cluster runs pg_stat_statements, and each PostgreSQL scenario also prints
the statements the server ran per paid request, the time it spent planning and running them, and
the N costliest (calls and microseconds per paid request). The extension's own bookkeeping costs
the server a little: the rates of such a run are not compared with others'.

Run:  python3 bench/postgres_vs_sqlite.py --agentpay build/agentpay [--duration 10s] [--connections 32]
Needs wrk, nginx (Debian nginx-light), PostgreSQL 15 server binaries and psql (scripts/bootstrap.sh).
"""

import argparse
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402

PRICE = 1
DEPOSIT = 10 ** 12
LB_CONF = """worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests 1000000;
    upstream gateways {{
{servers}
        keepalive 96;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://gateways;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream off;
        }}
    }}
}}
"""


def log(message):
    print(message, file=sys.stderr, flush=True)


class Cluster:
    def __init__(self, workdir, statements):
        self.state = os.path.join(workdir, "pg")
        self.statements = statements
        env = dict(os.environ)
        # A scenario's WAL is read back after its load (pg_walinspect, wal_written): kept until then.
        env["AGENTPAY_PG_SERVER_OPTIONS"] = "-c wal_keep_size=4GB"
        if statements:
            env["AGENTPAY_PG_SERVER_OPTIONS"] += (" -c shared_preload_libraries=pg_stat_statements "
                                                  "-c pg_stat_statements.track_planning=on")
        subprocess.run(["bash", os.path.join(ROOT, "tests", "pg", "cluster.sh"), "start", self.state],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        with open(os.path.join(self.state, "url")) as f:
            self.url = f.read().strip()
        if statements:
            self.psql("CREATE EXTENSION pg_stat_statements")
        self.psql("CREATE EXTENSION pg_walinspect")

    def psql(self, sql, url=None):
        return subprocess.run(["psql", url or self.url, "-XAtqc", sql], check=True,
                              capture_output=True, text=True).stdout

    def data_dir(self):
        with open(os.path.join(self.state, "data_dir")) as f:
            return f.read().strip()

    def fresh_database(self):
        name = "bench_" + secrets.token_hex(6)
        subprocess.run(["psql", self.url, "-qc", "CREATE DATABASE " + name], check=True)
        return self.url[:self.url.rindex("/") + 1] + name

    def stop(self):
        subprocess.run(["bash", os.path.join(ROOT, "tests", "pg", "cluster.sh"), "stop", self.state],
                       check=False)


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def paid_2xx(gw):
    m = re.search(r'^agentpay_paid_responses_total\{[^}]*class="2xx"[^}]*\} (\d+)', gw.metrics(), re.M)
    return int(m.group(1)) if m else 0


# Where each store writer's time goes (agentpay_store_writer_microseconds_total).
WRITER_PHASES = ("decide", "commit", "sync", "complete")


def store_counters(gws):
    """Decisions, commits, round trips (writer + readers) and the writers' microseconds by phase
    of the gateways' stores, summed."""
    totals = {"decisions": 0, "commits": 0, "round_trips": 0, "wal_bytes": 0}
    patterns = [("decisions", r"^agentpay_store_decisions_total (\d+)"),
                ("wal_bytes", r"^agentpay_store_wal_bytes_total (\d+)"),
                ("commits", r"^agentpay_store_commits_total (\d+)"),
                ("round_trips", r"^agentpay_store_round_trips_total\{[^}]*\} (\d+)")]
    for phase in WRITER_PHASES:
        totals[phase] = 0
        patterns.append((phase, r'^agentpay_store_writer_microseconds_total\{phase="%s"\} (\d+)' % phase))
    for gw in gws:
        text = gw.metrics()
        for key, pattern in patterns:
            totals[key] += sum(int(v) for v in re.findall(pattern, text, re.M))
    return totals


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids):
    """User + system CPU seconds of the processes (all their threads), dead ones counting 0."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def cluster_pids(cluster):
    """The postmaster and every process it started (backends, WAL writer, checkpointer...)."""
    if cluster is None:
        return []
    with open(os.path.join(cluster.data_dir(), "data", "postmaster.pid")) as f:
        postmaster = int(f.readline())
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True,
                              text=True).stdout.split()
    return [postmaster] + [int(p) for p in children]


def statement_rows(cluster, db):
    """(calls, planning + execution ms, query) of every statement run in `db` since the last
    reset, the costliest first."""
    name = db[db.rindex("/") + 1:]
    out = cluster.psql("SELECT calls, total_exec_time + total_plan_time, "
                       "regexp_replace(query, '\\s+', ' ', 'g') "
                       "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE "
                       "datname = '%s') ORDER BY 2 DESC" % name)
    rows = []
    for line in out.splitlines():
        calls, ms, query = line.split("|", 2)
        rows.append((int(calls), float(ms), query))
    return rows


def wal_position(cluster):
    return cluster.psql("SELECT pg_current_wal_lsn()").strip()


# pg_walinspect's record types (resource manager/record), counted per paid request. An index
# entry goes into a leaf page (INSERT_LEAF; INSERT_POST into a posting list) or, when the leaf is
# full, with its split (SPLIT_L/R; the parent's new downlink, INSERT_UPPER, is not an entry).
INDEX_ENTRY_RECORDS = ("Btree/INSERT_LEAF", "Btree/INSERT_POST", "Btree/SPLIT_L", "Btree/SPLIT_R")
ROW_RECORDS = {"inserted": ("Heap/INSERT", "Heap/INSERT+INIT"),
               "updated": ("Heap/UPDATE", "Heap/UPDATE+INIT"),
               "updated in place (HOT)": ("Heap/HOT_UPDATE", "Heap/HOT_UPDATE+INIT"),
               "deleted": ("Heap/DELETE",)}


def wal_written(cluster, start, end):
    """What the cluster wrote to its WAL between two positions: bytes, records, the bytes of
    full-page images among them, and records by type (pg_walinspect)."""
    out = cluster.psql("SELECT pg_wal_lsn_diff('%s', '%s')" % (end, start))
    written = {"bytes": int(float(out.strip())), "records": 0, "fpi_bytes": 0, "types": {}}
    for line in cluster.psql("SELECT \"resource_manager/record_type\", count, fpi_size FROM "
                             "pg_get_wal_stats('%s', '%s', true) WHERE count > 0" % (start, end)).splitlines():
        kind, count, fpi = line.split("|")
        written["types"][kind] = int(count)
        written["records"] += int(count)
        written["fpi_bytes"] += int(fpi)
    return written


def run_wrk(url, keys, duration, connections, delay_ms=None):
    env = dict(os.environ, BENCH_MODE="unique", BENCH_KEY_PREFIX="b-" + secrets.token_hex(4),
               BENCH_API_KEY=keys[0], BENCH_API_KEYS=",".join(keys), BENCH_PATH="/bench")
    if delay_ms is not None:
        env["BENCH_DELAY_MS"] = str(delay_ms)
    out = subprocess.run(["wrk", "-t1", "-c%d" % connections, "-d" + duration, "--timeout", "10s",
                          "-s", os.path.join(ROOT, "bench", "wrk", "bench.lua"), url],
                         env=env, capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("BENCH_RESULT"))
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    return fields


def scenario(name, args, workdir, seller, db, gateways, accounts, cluster, paced=None):
    """Starts `gateways` gateways on `db` (None: a fresh SQLite file), loads them, checks the money;
    returns the rate, the problems and the per-request costs. `paced`: the paid requests/s offered
    to each gateway instead of as many as they answer."""
    scratch = tempfile.mkdtemp(prefix="scenario-", dir=workdir)
    store = (db, db) if db else harness.fresh_store(scratch)
    gws, nginx = [], None
    try:
        for i in range(gateways):
            gw = harness.Gateway(scratch, seller.url, price=PRICE, db=store)
            gw.log_path = os.path.join(scratch, "gateway-%d.log" % i)
            gws.append(gw)
            gw.start()
        accts = [gws[0].create_account("bench-%d" % i, deposit=DEPOSIT, reference="d-%d" % i)
                 for i in range(accounts)]
        target = gws[0].port
        if gateways > 1:
            target = harness.free_port()
            conf = os.path.join(scratch, "lb.conf")
            with open(conf, "w") as f:
                f.write(LB_CONF.format(tmp=scratch, port=target, servers="\n".join(
                    "        server 127.0.0.1:%d;" % gw.port for gw in gws)))
            nginx = subprocess.Popen(["nginx", "-p", scratch, "-c", conf, "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while not port_open(target):
                if time.monotonic() > deadline or nginx.poll() is not None:
                    raise RuntimeError("nginx did not start")
                time.sleep(0.05)
        # Backends of the cluster come and go (each gateway's connections): counted at the end.
        gw_pids = [gw.popen.pid for gw in gws]
        pg_pids = cluster_pids(cluster if db else None)
        before = (cpu_seconds(gw_pids), cpu_seconds(pg_pids), cpu_seconds([seller.popen.pid]),
                  store_counters(gws), sum(paid_2xx(gw) for gw in gws),
                  wal_position(cluster) if db else None)
        if db and cluster.statements:
            cluster.psql("SELECT pg_stat_statements_reset()")
        connections = args.connections
        if gateways > 1:
            connections = args.x3_connections or args.connections * gateways
        # Paced, each connection waits on average as long as the connections need to offer each
        # gateway `paced` requests/s (less the time an answer takes: what they offer is a little
        # less, and the rate printed is what they got).
        delay_ms = max(1, round(connections * 1000 / (paced * gateways))) if paced else None
        result = run_wrk("http://127.0.0.1:%d/bench" % target, [a.api_key for a in accts],
                         args.duration, connections, delay_ms)
        pg_pids = cluster_pids(cluster if db else None)
        statements = statement_rows(cluster, db) if db and cluster.statements else []
        after = (cpu_seconds(gw_pids), cpu_seconds(pg_pids), cpu_seconds([seller.popen.pid]),
                 store_counters(gws), sum(paid_2xx(gw) for gw in gws),
                 wal_position(cluster) if db else None)
        wal = wal_written(cluster, before[5], after[5]) if db else None
        # Money: once nothing is held and the gateways answer nothing more (requests wrk left in
        # flight finish after it stops: one not begun yet holds nothing either), the accounts'
        # captures are the gateways' 2xx answers x price.
        deadline = time.monotonic() + 30
        while True:
            answered = sum(paid_2xx(gw) for gw in gws)
            views = [gws[0].account(a) for a in accts]
            settled = all(v["held"] == 0 for v in views)
            if (settled and answered == sum(paid_2xx(gw) for gw in gws)) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        captured = sum(v["captured"] for v in views)
        problems = []
        if any(v["held"] for v in views):
            problems.append("money still held: %r" % [v["held"] for v in views if v["held"]])
        if captured != answered * PRICE:
            problems.append("captured %d != %d 2xx answers x price" % (captured, answered))
        if int(result["non2xx"]) or int(result["sock_timeout"]) or int(result["sock_read"]):
            problems.append("non-2xx or socket errors: %r" % result)
        rate = int(result["ok2xx"]) / (int(result["duration_us"]) / 1e6)
        paid = max(1, after[4] - before[4])
        decisions = max(1, after[3]["decisions"] - before[3]["decisions"])
        costs = {
            "gateway_us": (after[0] - before[0]) * 1e6 / paid,
            # Backends that ended during the run are not counted; the gateways keep theirs open.
            "postgres_us": max(0.0, after[1] - before[1]) * 1e6 / paid,
            "seller_us": (after[2] - before[2]) * 1e6 / paid,
            "round_trips": (after[3]["round_trips"] - before[3]["round_trips"]) / decisions,
            "per_commit": decisions / max(1, after[3]["commits"] - before[3]["commits"]),
        }
        if wal:
            costs["wal_bytes"] = wal["bytes"] / paid
            costs["index_entries"] = sum(wal["types"].get(t, 0) for t in INDEX_ENTRY_RECORDS) / paid
        else:  # SQLite: what the gateway's writer wrote to the WAL (its /metrics)
            costs["wal_bytes"] = (after[3]["wal_bytes"] - before[3]["wal_bytes"]) / paid
        commits = max(1, after[3]["commits"] - before[3]["commits"])
        phases = {p: after[3][p] - before[3][p] for p in WRITER_PHASES}
        writer = "" if not any(phases.values()) else "; the writer%s per commit %s ms, busy %.0f%% of the run" % (
            "s" if gateways > 1 else "",
            "/".join("%.2f" % (phases[p] / commits / 1000) for p in WRITER_PHASES),
            100.0 * sum(phases.values()) / (gateways * int(result["duration_us"]))) + \
            " (deciding/committing/syncing/completing)"
        log("%-8s %-6s %8.0f paid requests/s  (%d connections%s, 2xx %s, p99 %.1f ms)%s" % (
            name, "hot" if accounts == 1 else "%d acc" % accounts, rate, connections,
            ", each waiting %d ms on average between requests" % delay_ms if paced else "",
            result["ok2xx"],
            int(result["lat_p99_us"]) / 1000, "  MONEY CHECK FAILED: " + "; ".join(problems) if problems else ""))
        log("         per paid request: CPU us gateways %.0f, PostgreSQL %.0f, seller %.0f; %.2f round "
            "trips per decision, %.1f decisions per commit%s" % (
                costs["gateway_us"], costs["postgres_us"], costs["seller_us"], costs["round_trips"],
                costs["per_commit"], writer))
        if wal:
            rows = ", ".join("%.1f %s" % (sum(wal["types"].get(t, 0) for t in types) / paid, what)
                             for what, types in ROW_RECORDS.items())
            log("         written per paid request: WAL %.0f bytes in %.1f records (%.0f bytes of "
                "full-page images; rows: %s; %.1f index entries)" % (
                    costs["wal_bytes"], wal["records"] / paid, wal["fpi_bytes"] / paid, rows,
                    costs["index_entries"]))
        else:
            log("         written per paid request: WAL %.0f bytes (whole pages: SQLite writes each page "
                "a commit changed)" % costs["wal_bytes"])
        if statements:
            calls = sum(r[0] for r in statements)
            ms_total = sum(r[1] for r in statements)
            log("         PostgreSQL ran %.1f statements per paid request, %.0f us planning and running "
                "them; the costliest (calls and us per paid request):" % (
                    calls / paid, ms_total * 1000 / paid))
            for c, ms, query in statements[:cluster.statements]:
                log("           %5.2f %6.1f  %s" % (c / paid, ms * 1000 / paid, query[:110]))
        return rate, problems, costs
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(timeout=10)
        for gw in gws:
            gw.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agentpay", required=True)
    parser.add_argument("--duration", default="10s")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--x3-connections", type=int, default=0,
                        help="wrk connections of the 3-gateway scenario (default: 3 x --connections, "
                             "so each gateway has the load one gateway has alone)")
    parser.add_argument("--accounts", type=int, default=32)
    parser.add_argument("--floor", type=float, default=0.5)
    parser.add_argument("--paced", default="", metavar="RATE[,RATE...]",
                        help="also run 1 and 3 gateways on PostgreSQL (over --accounts accounts) "
                             "with each gateway offered RATE paid requests/s (the 3 together 3x "
                             "RATE), and compare their CPU per paid request at that load")
    parser.add_argument("--statements", type=int, default=0, metavar="N",
                        help="run pg_stat_statements and print the statements PostgreSQL ran per "
                             "paid request, and the N costliest")
    args = parser.parse_args()
    try:
        paced_rates = [int(r) for r in args.paced.split(",") if r]
    except ValueError:
        sys.exit("postgres_vs_sqlite: --paced takes rates in paid requests/s, e.g. 500,1000")
    if any(r <= 0 for r in paced_rates):
        sys.exit("postgres_vs_sqlite: --paced rates must be positive")
    harness._binary = os.path.abspath(args.agentpay)
    for tool in ("wrk", "nginx", "psql"):
        if shutil.which(tool) is None:
            sys.exit("postgres_vs_sqlite: %s is missing (scripts/bootstrap.sh installs it)" % tool)
    workdir = tempfile.mkdtemp(prefix="agentpay-pg-bench-")
    seller = harness.Seller(workdir)
    cluster = None
    failed = []
    rates = {}
    costs = {}
    try:
        seller.start()
        cluster = Cluster(workdir, args.statements)
        log("1 thread, %d connections, %s per scenario, price %d; PostgreSQL %s" % (
            args.connections, args.duration, PRICE,
            subprocess.run(["psql", cluster.url, "-Atc", "SHOW server_version"], capture_output=True,
                           text=True).stdout.strip()))
        for accounts in (1, args.accounts):
            for name, gateways in (("sqlite", 1), ("pg", 1), ("pg x3", 3)):
                db = None if name == "sqlite" else cluster.fresh_database()
                rate, problems, cost = scenario(name, args, workdir, seller, db, gateways, accounts,
                                                cluster)
                rates[(name, accounts)] = rate
                costs[(name, accounts)] = cost
                failed += problems
        for offered in paced_rates:
            for name, gateways in (("pg", 1), ("pg x3", 3)):
                rate, problems, cost = scenario("%s@%d" % (name, offered), args, workdir, seller,
                                                cluster.fresh_database(), gateways, args.accounts,
                                                cluster, paced=offered)
                rates[("paced", name, offered)] = rate
                costs[("paced", name, offered)] = cost
                failed += problems
    finally:
        if cluster:
            cluster.stop()
        seller.kill9()
        shutil.rmtree(workdir, ignore_errors=True)
    for accounts in (1, args.accounts):
        base = rates[("sqlite", accounts)]
        label = "hot account" if accounts == 1 else "%d accounts" % accounts
        pg1, pg3 = rates[("pg", accounts)] / base, rates[("pg x3", accounts)] / base
        print("BENCH_SUMMARY postgres %s: 1 gateway %.2fx sqlite, 3 gateways behind nginx %.2fx sqlite "
              "(sqlite %.0f/s; floor %.2f for 1 gateway)" % (label, pg1, pg3, base, args.floor), flush=True)
        one, three = costs[("pg", accounts)], costs[("pg x3", accounts)]
        print("BENCH_COSTS postgres %s, per paid request: 1 gateway %.0f us + PostgreSQL %.0f us, "
              "%.2f round trips per decision, WAL %.0f bytes, %.1f index entries; 3 gateways %.0f us "
              "(%.2fx 1 gateway's) + PostgreSQL %.0f us (%.2fx), %.2f round trips per decision, WAL "
              "%.0f bytes, %.1f index entries; sqlite gateway %.0f us, WAL %.0f bytes" % (
                  label, one["gateway_us"], one["postgres_us"], one["round_trips"],
                  one["wal_bytes"], one["index_entries"],
                  three["gateway_us"], three["gateway_us"] / max(1.0, one["gateway_us"]),
                  three["postgres_us"], three["postgres_us"] / max(1.0, one["postgres_us"]),
                  three["round_trips"], three["wal_bytes"], three["index_entries"],
                  costs[("sqlite", accounts)]["gateway_us"],
                  costs[("sqlite", accounts)]["wal_bytes"]), flush=True)
        if pg1 < args.floor:
            failed.append("1 gateway on PostgreSQL (%s) at %.2fx sqlite, below the floor %.2f" % (
                label, pg1, args.floor))
    for offered in paced_rates:
        one, three = costs[("paced", "pg", offered)], costs[("paced", "pg x3", offered)]
        got = (rates[("paced", "pg", offered)], rates[("paced", "pg x3", offered)] / 3)
        print("BENCH_PACED postgres %d accounts, each gateway offered %d/s: 1 gateway %.0f/s, %.0f us + "
              "PostgreSQL %.0f us per paid request, %.1f decisions per commit; 3 gateways %.0f/s each, "
              "%.0f us (%.2fx 1 gateway's) + PostgreSQL %.0f us (%.2fx), %.1f decisions per commit" % (
                  args.accounts, offered, got[0], one["gateway_us"], one["postgres_us"],
                  one["per_commit"], got[1], three["gateway_us"],
                  three["gateway_us"] / max(1.0, one["gateway_us"]), three["postgres_us"],
                  three["postgres_us"] / max(1.0, one["postgres_us"]), three["per_commit"]), flush=True)
        if min(got) < 0.9 * offered:
            # Not a failure: the costs are right for the load the gateways got, which is not the
            # one asked for (they, or the machine, could not take it, or the waits dominate).
            print("BENCH_PACED note: a gateway got under 90%% of the %d/s offered (%.0f/s, %.0f/s "
                  "each): that run compares another load" % (offered, got[0], got[1]), flush=True)
    if failed:
        print("FAILED: " + "; ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
