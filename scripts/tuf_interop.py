#!/usr/bin/env python3
"""python-tuf's client (ngclient) reads a repository written by `kiln tuf-repo`.

    tuf_interop.py KILN WORKDIR    (run with a Python that has tuf installed)

Writes a repository with kiln (ed25519 keys, then a root rotation and an ecdsa snapshot key
rotation), serves it on loopback, refreshes and downloads a target with python-tuf, and checks
the bytes and the root version. Exit 0 on success; any failure raises.
"""
import functools
import http.server
import os
import subprocess
import sys
import threading

from tuf.ngclient import Updater


def main() -> int:
    kiln, work = sys.argv[1], sys.argv[2]
    repo = os.path.join(work, "repo")
    payload = os.path.join(work, "kiln-0.1.0-index.json")
    os.makedirs(work, exist_ok=True)
    with open(payload, "wb") as f:
        f.write(b'{"interop": true}\n')

    def tuf_repo(*args: str) -> None:
        subprocess.run([kiln, "tuf-repo", "--dir", repo, *args], check=True)

    tuf_repo("init")
    tuf_repo("add", payload)
    tuf_repo("rotate", "root")
    tuf_repo("--scheme", "ecdsa-sha2-nistp256", "rotate", "snapshot")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=repo)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        md, dl = os.path.join(work, "md"), os.path.join(work, "dl")
        os.makedirs(md)
        os.makedirs(dl)
        with open(os.path.join(repo, "metadata", "1.root.json"), "rb") as src:
            with open(os.path.join(md, "root.json"), "wb") as dst:
                dst.write(src.read())
        updater = Updater(md, f"{base}/metadata/", dl, f"{base}/targets/", bootstrap=None)
        updater.refresh()
        info = updater.get_targetinfo("kiln-0.1.0-index.json")
        assert info is not None, "python-tuf did not find the target"
        path = updater.download_target(info)
        with open(path, "rb") as f:
            assert f.read() == b'{"interop": true}\n', "python-tuf downloaded other bytes"
        version = updater._trusted_set.root.version  # noqa: SLF001
        assert version == 3, f"python-tuf trusts root v{version}, expected v3"
    finally:
        server.shutdown()
    print("tuf_interop: python-tuf read the kiln-written repository (root v3, target verified)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
