#!/usr/bin/env python3
"""A small stand-in for the Hugging Face Hub, for test_pull.

Serves the repositories under ROOT (ROOT/ORG/REPO/...) as the Hub does:
  GET /api/models/ORG/REPO/tree/main?recursive=true   the file list (JSON; LFS
      files carry their SHA-256 as lfs.oid), paged with a Link header
  GET /ORG/REPO/resolve/main/PATH   a redirect to /cdn/ORG/REPO/PATH, which
      serves the bytes, with ranges
Refusals carry the Hub's X-Error-Code (RepoNotFound, EntryNotFound, GatedRepo).

The test steers it with POST /_control (a JSON object, merged in):
  cut      {PATH: [OFFSET, TIMES]}  the next TIMES downloads of PATH stop at
           byte OFFSET of the file and close the connection
  corrupt  [PATH, ...]              serve PATH with one byte flipped
  gated    {"ORG/REPO": TOKEN}      downloads need "Authorization: Bearer TOKEN"
  page     N                        file-list entries per page
  link_host HOST                    the next page's link names HOST
  size     {PATH: N}                list PATH with size N
  gone     [PATH, ...]              list PATH, but answer its download with a 404
  hold     {PATH: OFFSET}           the next download of PATH stops at byte OFFSET
                                    until {"release": true}
and reads every request it got from GET /_log, and which download is held
(if one is) from GET /_state.
Prints "port N" on stdout once it listens on 127.0.0.1.
"""
import hashlib
import json
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = sys.argv[1]
STATE = {"cut": {}, "corrupt": [], "gated": {}, "page": 0, "size": {}, "hold": {}, "gone": []}
HELD = {"path": ""}
RELEASE = threading.Event()
LOG = []
LOCK = threading.Lock()
HASHES = {}


def sha256_of(path):
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        HASHES[key] = h.hexdigest()
    return HASHES[key]


def listing(repo_dir):
    out = []
    for base, dirs, files in os.walk(repo_dir):
        dirs.sort()
        rel = os.path.relpath(base, repo_dir)
        if rel != ".":
            out.append({"type": "directory", "path": rel, "oid": "0" * 40, "size": 0})
        for name in sorted(files):
            full = os.path.join(base, name)
            path = os.path.normpath(os.path.join(rel, name))
            size = STATE["size"].get(path, os.path.getsize(full))
            e = {"type": "file", "path": path, "oid": "1" * 40, "size": size}
            if name.endswith(".gguf"):
                e["size"] = 134
                e["lfs"] = {"oid": sha256_of(full), "size": size, "pointerSize": 134}
            out.append(e)
    return out


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def refuse(self, status, code, msg):
        body = json.dumps({"error": msg}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", msg)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def reply(self, status, body, ctype="application/json", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.path == "/_control":
            with LOCK:
                if body.get("hold"):
                    RELEASE.clear()
                if body.pop("release", False):
                    RELEASE.set()
                STATE.update(body)
            self.reply(200, b"{}")
        else:
            self.refuse(404, None, "no such endpoint")

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if path == "/_log":
            with LOCK:
                self.reply(200, json.dumps(LOG).encode())
            return
        if path == "/_state":
            with LOCK:
                self.reply(200, json.dumps({"held": HELD["path"]}).encode())
            return
        with LOCK:
            LOG.append({"path": path, "query": url.query,
                        "range": self.headers.get("Range", ""),
                        "auth": self.headers.get("Authorization", "")})
        parts = path.strip("/").split("/")
        if path.startswith("/api/models/") and len(parts) >= 6 and parts[4] == "tree":
            repo = "/".join(parts[2:4])
            repo_dir = os.path.join(ROOT, repo)
            if not os.path.isdir(repo_dir):
                return self.refuse(401, "RepoNotFound", "Repository not found")
            files = listing(repo_dir)
            page = STATE["page"]
            start = int(urllib.parse.parse_qs(url.query).get("cursor", ["0"])[0])
            headers = []
            if page:
                if start + page < len(files):
                    host = self.headers["Host"]
                    if STATE.get("link_host"):  # a next page elsewhere
                        host = STATE["link_host"] + ":" + host.split(":")[1]
                    nxt = "http://%s/api/models/%s/tree/main?recursive=true&cursor=%d" % (
                        host, repo, start + page)
                    headers.append(("Link", '<%s>; rel="next"' % nxt))
                files = files[start:start + page]
            return self.reply(200, json.dumps(files).encode(), headers=headers)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = "/".join(parts[0:2])
            if not os.path.isdir(os.path.join(ROOT, repo)):
                return self.refuse(401, "RepoNotFound", "Repository not found")
            token = STATE["gated"].get(repo)
            if token is not None:
                auth = self.headers.get("Authorization", "")
                if not auth:
                    return self.refuse(401, "GatedRepo", "Access to this model is restricted")
                if auth != "Bearer " + token:
                    return self.refuse(403, "GatedRepo", "Access to this model is restricted")
            rel = "/".join(parts[4:])
            if not os.path.isfile(os.path.join(ROOT, repo, rel)) or rel in STATE["gone"]:
                return self.refuse(404, "EntryNotFound", "Entry not found")
            where = "/cdn/%s/%s" % (repo, rel)
            # a body, as the Hub's redirects have: it must not reach the file
            return self.reply(302, ("Found. Redirecting to " + where).encode(), "text/plain",
                              headers=[("Location", where)])
        if parts[0] == "cdn" and len(parts) >= 4:
            return self.serve_file("/".join(parts[1:3]), "/".join(parts[3:]))
        self.refuse(404, None, "no such endpoint")

    def serve_file(self, repo, rel):
        full = os.path.join(ROOT, repo, rel)
        with open(full, "rb") as f:
            data = bytearray(f.read())
        if rel in STATE["corrupt"]:
            data[len(data) // 2] ^= 0xFF
        first, status = 0, 200
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            first, status = int(rng[6:-1]), 206
        cut = None
        with LOCK:
            c = STATE["cut"].get(rel)
            if c and c[1] > 0:
                c[1] -= 1
                cut = c[0]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data) - first))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, len(data) - 1, len(data)))
        self.end_headers()
        end = len(data) if cut is None else max(first, cut)
        with LOCK:
            hold = STATE["hold"].pop(rel, None)
        if hold is not None and first < hold < end:
            self.wfile.write(bytes(data[first:hold]))
            self.wfile.flush()
            with LOCK:
                HELD["path"] = rel
            RELEASE.wait()
            with LOCK:
                HELD["path"] = ""
            first = hold
        self.wfile.write(bytes(data[first:end]))
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up midway (hearth on a mismatch) is no error here


server = Server(("127.0.0.1", 0), Hub)
print("port %d" % server.server_address[1], flush=True)
server.serve_forever()
