#!/usr/bin/python3
"""A load test of `hearth serve` with hostile requests mixed in.

Starts the server on a free loopback port, then for --seconds runs
--clients streaming chat clients in a loop; a --drop share of their
requests hang up mid-stream. Every --hostile-every seconds one hostile
request goes in beside them, in turn: grammars and schemas that are costly
to compile, malformed framing, a connection that sends half a head and
waits. It samples the server's RSS every second and at the end sends
SIGTERM and times the exit.

  python3 tools/loadtest.py --hearth build/hearth --model models/stories260K.gguf

It passes (exit 0) when no ordinary request failed (a status other than
200, or a stream that did not end with [DONE]), every hostile request got
an answer below 500 or was closed, the RSS of the last third of the run is
within --rss-slack of the middle third's, and SIGTERM ended the process
cleanly within 5 s. A load test, not a unit test: it runs for minutes and
is not part of `make test`; `make loadtest` runs it.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ORDINARY_PROMPTS = [
    "Once upon a time",
    "The little dog",
    "Lily and Tom went to the park",
    "One day, a bird",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = 0
        self.dropped = 0
        self.errors = []
        self.hostile = []  # (name, outcome, seconds)

    def error(self, what):
        with self.lock:
            self.errors.append(what)


def ordinary(port, stats, stop, drop, rng, max_tokens):
    while not stop.is_set():
        body = json.dumps({
            "model": "m",
            "messages": [{"role": "user", "content": rng.choice(ORDINARY_PROMPTS)}],
            "max_tokens": max_tokens,
            "stream": True,
        })
        hang_up = rng.random() < drop
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            conn.request("POST", "/v1/chat/completions", body,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                stats.error(f"status {r.status}: {r.read(300)!r}")
                continue
            done = False
            lines = 0
            while True:
                line = r.readline()
                if not line:
                    break
                lines += 1
                if hang_up and lines >= 3:
                    break
                if line.strip() == b"data: [DONE]":
                    done = True
                    break
            if hang_up:
                with stats.lock:
                    stats.dropped += 1
            elif not done:
                stats.error("stream ended without [DONE]")
            else:
                with stats.lock:
                    stats.ok += 1
        except (OSError, http.client.HTTPException) as e:
            stats.error(f"{type(e).__name__}: {e}")
        finally:
            conn.close()


def post_json(port, path, obj, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        return f"status {r.status}", r.status
    finally:
        conn.close()


def raw(port, data, hold=False, timeout=60):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not hold:
            s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got and not hold:
                break
        if not got:
            return "closed without an answer", 0
        status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/") else 0
        return f"status {status}", status
    finally:
        s.close()


def chat(grammar=None, schema=None):
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    if grammar:
        req["grammar"] = grammar
    if schema:
        req["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": "x", "schema": schema}}
    return req


HOSTILE = [
    ("nested repetition grammar",
     lambda p: post_json(p, "/v1/chat/completions",
                         chat(grammar="root ::= (([a-z]){0,1000}){0,1000}"))),
    ("nested repetition in a schema pattern",
     lambda p: post_json(p, "/v1/chat/completions",
                         chat(schema={"type": "string", "pattern": "^(([a-z]{0,1000}){0,1000})$"}))),
    ("100,000-value enum",
     lambda p: post_json(p, "/v1/chat/completions",
                         chat(schema={"enum": [f"v{i}" for i in range(100000)]}))),
    ("20,000 required properties",
     lambda p: post_json(p, "/v1/chat/completions",
                         chat(schema={"type": "object",
                                      "properties": {f"p{i}": {"type": "integer"}
                                                     for i in range(20000)},
                                      "required": [f"p{i}" for i in range(20000)]}))),
    ("100,000-alternative grammar",
     lambda p: post_json(p, "/v1/chat/completions",
                         chat(grammar="root ::= " + " | ".join(f'"a{i}"' for i in range(100000))))),
    ("overflowing Content-Length",
     lambda p: raw(p, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 99999999999999999999999\r\n\r\n{")),
    ("negative Content-Length",
     lambda p: raw(p, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n")),
    ("garbage request line",
     lambda p: raw(p, b"\x01\x02 what is this\r\n\r\n")),
    ("half a head, held open",
     lambda p: raw(p, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", hold=True, timeout=30)),
]


def hostile(port, stats, stop, every):
    i = 0
    while not stop.wait(every):
        name, fn = HOSTILE[i % len(HOSTILE)]
        i += 1
        t0 = time.monotonic()
        try:
            outcome, status = fn(port)
        except socket.timeout:
            outcome, status = "no answer (client timeout)", -1
        except (OSError, http.client.HTTPException) as e:
            outcome, status = f"{type(e).__name__}: {e}", 0
        with stats.lock:
            stats.hostile.append((name, outcome, status, time.monotonic() - t0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hearth", default="build/hearth")
    ap.add_argument("--model", default="models/stories260K.gguf")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--drop", type=float, default=0.1, help="share of streams hung up mid-way")
    ap.add_argument("--hostile-every", type=float, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rss-slack", type=float, default=0.10)
    ap.add_argument("--server-timeout", type=int, default=20,
                    help="hearth serve --timeout: closes the held half-open connection (0: not passed)")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="one more argument for hearth serve (repeatable)")
    args = ap.parse_args()

    port = free_port()
    cmd = [args.hearth, "serve", "-m", args.model, "--port", str(port), "-np", "8",
           "--max-queue", str(args.clients * 2), "--cache-ram", "64M"]
    if args.server_timeout:
        cmd += ["--timeout", str(args.server_timeout)]
    cmd += args.server_arg
    log = open("loadtest-server.log", "w")
    srv = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        if srv.poll() is not None:
            sys.exit(f"loadtest: the server exited at start-up ({srv.returncode}); "
                     "see loadtest-server.log")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            srv.kill()
            sys.exit("loadtest: the server did not become ready in 60 s")
        time.sleep(0.2)

    stats = Stats()
    stop = threading.Event()
    threads = [threading.Thread(target=ordinary,
                                args=(port, stats, stop, args.drop, random.Random(i),
                                      args.max_tokens))
               for i in range(args.clients)]
    threads.append(threading.Thread(target=hostile, args=(port, stats, stop, args.hostile_every)))
    for t in threads:
        t.start()
    rss = []
    t_end = time.monotonic() + args.seconds
    while time.monotonic() < t_end:
        v = rss_kib(srv.pid)
        if v:
            rss.append(v)
        time.sleep(1)
    stop.set()
    for t in threads:
        t.join(timeout=180)
    stuck = sum(t.is_alive() for t in threads)

    t0 = time.monotonic()
    srv.send_signal(signal.SIGTERM)
    try:
        rc = srv.wait(timeout=5)
        exit_s = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        srv.kill()
        rc, exit_s = None, None
    log.close()

    third = max(1, len(rss) // 3)
    mid = statistics.median(rss[third:2 * third]) if len(rss) >= 3 else None
    last = statistics.median(rss[2 * third:]) if len(rss) >= 3 else None
    print(f"server: {' '.join(cmd)}")
    print(f"ordinary: {stats.ok} completed, {stats.dropped} hung up mid-stream on purpose, "
          f"{len(stats.errors)} errors")
    for e in stats.errors[:10]:
        print(f"  error: {e}")
    bad_hostile = 0
    for name, outcome, status, secs in stats.hostile:
        ok = 0 <= status < 500 and not outcome.startswith("no answer")
        bad_hostile += not ok
        print(f"hostile: {name}: {outcome} in {secs:.2f} s{'' if ok else '  <- FAILED'}")
    if rss:
        print(f"rss: first {rss[0] // 1024} MiB, middle third median {mid // 1024 if mid else '-'} MiB, "
              f"last third median {last // 1024 if last else '-'} MiB, max {max(rss) // 1024} MiB")
    print(f"sigterm: " + (f"exit status {rc} after {exit_s:.2f} s" if rc is not None
                          else "still running after 5 s (killed)"))
    failed = []
    if stats.errors:
        failed.append(f"{len(stats.errors)} ordinary requests failed")
    if bad_hostile:
        failed.append(f"{bad_hostile} hostile requests got a 5xx or no answer")
    if stuck:
        failed.append(f"{stuck} client threads never finished")
    if mid and last and last > mid * (1 + args.rss_slack):
        failed.append(f"RSS grew {100 * (last / mid - 1):.1f}% from the middle third to the last")
    if rc != 0:
        failed.append("SIGTERM did not end the server cleanly within 5 s")
    if failed:
        print("FAILED: " + "; ".join(failed))
        sys.exit(1)
    print("passed")


if __name__ == "__main__":
    main()
