#!/usr/bin/env python3
"""A static file server on loopback that misbehaves on purpose, for kiln's fetch tests.

Serves --root like a plain mirror. Requests whose path contains --match (default ".tar.zst")
get the behaviour of --mode; others are served normally. Every request (path and count) is
written to --count-file after it is answered, so a test can assert how often the mirror was
asked. The chosen port is written to --port-file (start with --port 0 to let the OS pick).

Modes:
  ok            serve the file
  flip          same size, one byte flipped in the middle
  truncate      Content-Length and body of only the first half
  endless       the file, then garbage forever, without Content-Length
  404 / 403     that status
  500-then-200  500 for the first --fail-count requests of a path, then the file
  429           429 with "Retry-After: --retry-after" for the first --fail-count requests
  stall         full Content-Length, half the body, then silence for --stall-seconds
  redirect      302 to --redirect-to + path (e.g. https -> http)
  redirect-tab  the same 302 with the status line "HTTP/2<TAB>302", which libcurl reads as a 302
  slow          the file in 20 pieces over about a second (so concurrent clients overlap)
  drip          full Content-Length, then the file at --drip-rate bytes/s in ten pieces a
                second: above a low-speed limit, so only a total deadline ends it
  trickle       no Content-Length, then garbage forever at --drip-rate bytes/s in ten pieces a
                second (an endless file just above a low-speed limit; only a deadline ends it)
"""
import argparse
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
counts = {}


def record(args, path):
    with lock:
        counts[path] = counts.get(path, 0) + 1
        data = json.dumps({"total": sum(counts.values()), "paths": counts}, sort_keys=True)
        tmp = args.count_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(data)
        os.replace(tmp, args.count_file)
        return counts[path]


def make_handler(args):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            if args.verbose:
                sys.stderr.write("server: " + (fmt % a) + "\n")

        def send_plain(self, status, extra=None, body=b""):
            self.send_response(status)
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            n = record(args, path)
            local = os.path.join(args.root, path.lstrip("/"))
            if ".." in path.split("/") or not os.path.isfile(local):
                self.send_plain(404, body=b"not found\n")
                return
            with open(local, "rb") as f:
                data = f.read()
            mode = args.mode if args.match in path else "ok"
            head = self.command == "HEAD"
            if mode in ("404", "403"):
                self.send_plain(int(mode), body=b"refused\n")
            elif mode == "500-then-200" and n <= args.fail_count:
                self.send_plain(500, body=b"internal error\n")
            elif mode == "429" and n <= args.fail_count:
                self.send_plain(429, {"Retry-After": str(args.retry_after)}, b"slow down\n")
            elif mode == "redirect":
                self.send_plain(302, {"Location": args.redirect_to.rstrip("/") + path})
            elif mode == "redirect-tab":
                location = args.redirect_to.rstrip("/") + path
                self.wfile.write(b"HTTP/2\t302\r\nLocation: " + location.encode() +
                                 b"\r\nContent-Length: 0\r\n\r\n")
            elif mode == "flip":
                b = bytearray(data)
                if b:
                    b[len(b) // 2] ^= 0x01
                self.send_plain(200, body=bytes(b))
            elif mode == "truncate":
                self.send_plain(200, body=data[: len(data) // 2])
            elif mode == "endless":
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                if head:
                    return
                self.close_connection = True
                try:
                    self.wfile.write(data)
                    chunk = b"\xAB" * 65536
                    deadline = time.time() + 60
                    while time.time() < deadline:
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
            elif mode == "stall":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if head:
                    return
                try:
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    time.sleep(args.stall_seconds)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
                self.close_connection = True
            elif mode == "slow":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if head:
                    return
                step = max(1, len(data) // 20 + 1)
                for i in range(0, len(data), step):
                    self.wfile.write(data[i : i + step])
                    self.wfile.flush()
                    time.sleep(0.05)
            elif mode == "drip":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if head:
                    return
                step = max(1, args.drip_rate // 10)
                try:
                    for i in range(0, len(data), step):
                        self.wfile.write(data[i : i + step])
                        self.wfile.flush()
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
                self.close_connection = True
            elif mode == "trickle":
                self.send_response(200)
                self.end_headers()
                if head:
                    return
                step = max(1, args.drip_rate // 10)
                try:
                    while True:
                        self.wfile.write(b"\x20" * step)
                        self.wfile.flush()
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
                self.close_connection = True
            else:
                self.send_plain(200, {"Content-Type": "application/octet-stream"}, data)

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", required=True)
    p.add_argument("--count-file", required=True)
    p.add_argument("--mode", default="ok")
    p.add_argument("--match", default=".tar.zst")
    p.add_argument("--fail-count", type=int, default=1)
    p.add_argument("--retry-after", default="1")
    p.add_argument("--stall-seconds", type=float, default=30)
    p.add_argument("--redirect-to", default="")
    p.add_argument("--drip-rate", type=int, default=2048)
    p.add_argument("--tls-cert", default="")
    p.add_argument("--tls-key", default="")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()

    ThreadingHTTPServer.daemon_threads = True
    # Many clients at once (tests/node/many_processes.sh: 64 processes): no refused connects.
    ThreadingHTTPServer.request_queue_size = 256
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    record(args, "__start__")
    with lock:
        counts.clear()
        with open(args.count_file, "w") as f:
            f.write(json.dumps({"total": 0, "paths": {}}))
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
