#!/usr/bin/env python3
"""TUF interoperability between kiln and python-tuf (run with a Python that has `tuf` 7.0.0).

    tuf_interop.py KILN WORKDIR            python-tuf's client reads a kiln-written repository
    tuf_interop.py --write-python WORKDIR  python-tuf writes a repository for kiln to read

KILN WORKDIR: `kiln tuf-repo` writes a repository with thresholds above 1 and both signing
schemes (root 3 ecdsa keys, threshold 2; targets 2 ed25519 keys, threshold 2; snapshot ecdsa;
timestamp ed25519), publishes a release directory, rotates the root and revokes a timestamp
key; python-tuf's ngclient refreshes over HTTP on loopback and downloads every target,
checking the bytes and the root version. Exit 0 on success; any failure raises.

--write-python WORKDIR: writes WORKDIR/pyrepo/{metadata,targets} with python-tuf's metadata
API: consistent snapshots, root 2-of-3 ecdsa then rotated to root v2, targets 2-of-2 (ed25519
and ecdsa), a delegated role "kernels" (paths "kernels/*", 2-of-2 ecdsa) and its target, and
prints one line per target: "<path> <sha256>" (tests/integration/tuf_loopback_test.cpp serves
it and has `kiln tuf-client` download them).
"""
import functools
import hashlib
import http.server
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone


def kiln_repo_read_by_python_tuf(kiln: str, work: str) -> int:
    from tuf.ngclient import Updater

    repo = os.path.join(work, "repo")
    release = os.path.join(work, "release")
    os.makedirs(os.path.join(release, "wheels"), exist_ok=True)
    files = {
        "kiln-kernels-0.1.0-index.json": b'{"interop": true}\n',
        "kiln-0.1.0-SHA256SUMS": b"0" * 64 + b"  x\n",
        "wheels/kiln_kernels-0.1.0-py3-none-any.whl": os.urandom(3000),
    }
    for name, data in files.items():
        with open(os.path.join(release, name), "wb") as f:
            f.write(data)

    def tuf_repo(*args: str) -> str:
        return subprocess.run([kiln, "tuf-repo", "--dir", repo, *args], check=True,
                              capture_output=True, text=True).stdout

    tuf_repo("--keys", "root=3", "--threshold", "root=2", "--scheme", "root=ecdsa-sha2-nistp256",
             "--keys", "targets=2", "--threshold", "targets=2",
             "--scheme", "snapshot=ecdsa-sha2-nistp256", "--keys", "timestamp=2", "init")
    tuf_repo("add", release)
    tuf_repo("rotate", "root")
    import json
    with open(os.path.join(repo, "metadata", "root.json")) as f:
        ts_key = json.load(f)["signed"]["roles"]["timestamp"]["keyids"][0]
    tuf_repo("revoke", "timestamp", ts_key[:12])

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
        for name, data in files.items():
            info = updater.get_targetinfo(name)
            assert info is not None, f"python-tuf did not find target {name}"
            path = updater.download_target(info)
            with open(path, "rb") as f:
                assert f.read() == data, f"python-tuf downloaded other bytes for {name}"
        version = updater._trusted_set.root.version  # noqa: SLF001
        assert version == 3, f"python-tuf trusts root v{version}, expected v3"
    finally:
        server.shutdown()
    print("tuf_interop: python-tuf read the kiln-written repository "
          f"(root v3, thresholds 2, ed25519 and ecdsa, {len(files)} targets verified)")
    return 0


def python_tuf_writes(work: str) -> int:
    from securesystemslib.signer import CryptoSigner
    from tuf.api.metadata import (DelegatedRole, Delegations, Metadata, MetaFile, Root,
                                  Snapshot, TargetFile, Targets, Timestamp)
    from tuf.api.serialization.json import JSONSerializer

    out = os.path.join(work, "pyrepo")
    meta_dir, targets_dir = os.path.join(out, "metadata"), os.path.join(out, "targets")
    os.makedirs(meta_dir)
    os.makedirs(os.path.join(targets_dir, "kernels"))
    expires = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=7)
    ser = JSONSerializer(compact=False)

    root_keys = [CryptoSigner.generate_ecdsa() for _ in range(3)]
    targets_keys = [CryptoSigner.generate_ed25519(), CryptoSigner.generate_ecdsa()]
    snapshot_key, timestamp_key = CryptoSigner.generate_ed25519(), CryptoSigner.generate_ecdsa()
    kernels_keys = [CryptoSigner.generate_ecdsa() for _ in range(2)]

    root = Root(expires=expires, consistent_snapshot=True)
    for s in root_keys:
        root.add_key(s.public_key, "root")
    root.roles["root"].threshold = 2
    for s in targets_keys:
        root.add_key(s.public_key, "targets")
    root.roles["targets"].threshold = 2
    root.add_key(snapshot_key.public_key, "snapshot")
    root.add_key(timestamp_key.public_key, "timestamp")
    root_md = Metadata(root)
    for s in root_keys[:2]:
        root_md.sign(s, append=True)
    root_md.to_file(os.path.join(meta_dir, "1.root.json"), ser)

    # Root v2: one root key replaced; signed by 2 of v1's keys and 2 of its own.
    new_root_key = CryptoSigner.generate_ed25519()
    root.revoke_key(root_keys[0].public_key.keyid, "root")
    root.add_key(new_root_key.public_key, "root")
    root.version = 2
    root_md = Metadata(root)
    for s in (root_keys[0], root_keys[1], new_root_key):
        root_md.sign(s, append=True)
    root_md.to_file(os.path.join(meta_dir, "2.root.json"), ser)

    lines = []

    def add_target(md_targets: Targets, path: str, data: bytes) -> None:
        tf = TargetFile.from_data(path, data, ["sha256", "sha512"])
        md_targets.targets[path] = tf
        d, base = os.path.split(path)
        for h in tf.hashes.values():
            with open(os.path.join(targets_dir, d, f"{h}.{base}"), "wb") as f:
                f.write(data)
        lines.append(f"{path} {hashlib.sha256(data).hexdigest()}")

    kernels = Targets(expires=expires)
    add_target(kernels, "kernels/sm_90a.tar.zst", os.urandom(5000))
    targets = Targets(expires=expires)
    add_target(targets, "kiln-kernels-0.1.0-index.json", b'{"written by": "python-tuf"}\n')
    targets.delegations = Delegations(
        keys={s.public_key.keyid: s.public_key for s in kernels_keys},
        roles={"kernels": DelegatedRole("kernels", [s.public_key.keyid for s in kernels_keys],
                                        2, True, paths=["kernels/*"])})

    def write(md: Metadata, name: str, signers: list) -> bytes:
        for s in signers:
            md.sign(s, append=True)
        data = md.to_bytes(ser)
        with open(os.path.join(meta_dir, name), "wb") as f:
            f.write(data)
        return data

    kernels_bytes = write(Metadata(kernels), "1.kernels.json", kernels_keys)
    targets_bytes = write(Metadata(targets), "1.targets.json", targets_keys)
    snapshot = Snapshot(expires=expires)
    snapshot.meta["targets.json"] = MetaFile(1, len(targets_bytes),
                                             {"sha256": hashlib.sha256(targets_bytes).hexdigest()})
    snapshot.meta["kernels.json"] = MetaFile(1, len(kernels_bytes),
                                             {"sha256": hashlib.sha256(kernels_bytes).hexdigest()})
    snapshot_bytes = write(Metadata(snapshot), "1.snapshot.json", [snapshot_key])
    timestamp = Timestamp(expires=expires)
    timestamp.snapshot_meta = MetaFile(1, len(snapshot_bytes),
                                       {"sha256": hashlib.sha256(snapshot_bytes).hexdigest()})
    write(Metadata(timestamp), "timestamp.json", [timestamp_key])
    print("\n".join(lines))
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--write-python":
        return python_tuf_writes(sys.argv[2])
    if len(sys.argv) == 3:
        os.makedirs(sys.argv[2], exist_ok=True)
        return kiln_repo_read_by_python_tuf(sys.argv[1], sys.argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
