"""A throw-away PostgreSQL cluster for the tests that need one.

``LLASSEMBLY_TEST_POSTGRES`` (a libpq connection string) names a server to use; ``.ci/run``
starts one and sets it. Without it, :func:`start` looks for ``initdb`` and ``pg_ctl`` (on the
``PATH`` or under ``/usr/lib/postgresql/*/bin``, where Debian's packages put them), creates a
cluster in a temporary folder and starts it on a free local port. PostgreSQL refuses to run as
root, so under root the cluster belongs to the ``postgres`` user (``runuser``).

``python tests/pg_cluster.py`` starts one, prints its connection string and waits for Enter.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENV = "LLASSEMBLY_TEST_POSTGRES"


class NoPostgres(Exception):
    """No PostgreSQL server could be started here (the message says why)."""


@dataclass
class Cluster:
    """A running throw-away cluster: its connection string, folder and ``pg_ctl``."""

    dsn: str
    folder: Path
    pg_ctl: str
    prefix: list[str]

    def stop(self) -> None:
        data = str(self.folder / "data")
        subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def _binaries() -> tuple[str, str]:
    found = {name: shutil.which(name) for name in ("initdb", "pg_ctl")}
    if found["initdb"] and found["pg_ctl"]:
        return found["initdb"], found["pg_ctl"]
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        initdb, pg_ctl = os.path.join(folder, "initdb"), os.path.join(folder, "pg_ctl")
        if os.access(initdb, os.X_OK) and os.access(pg_ctl, os.X_OK):
            return initdb, pg_ctl
    raise NoPostgres("no initdb/pg_ctl found (install Debian's postgresql package)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start() -> Cluster:
    """Create and start a cluster; raise :class:`NoPostgres` when that is not possible."""
    initdb, pg_ctl = _binaries()
    prefix: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="llassembly-pg-"))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise NoPostgres("running as root and there is no 'postgres' user") from None
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()
    steps = [
        [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
        [
            pg_ctl,
            "-D",
            str(data),
            "-l",
            str(folder / "server.log"),
            "-o",
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1",
            "-w",
            "start",
        ],
    ]
    for step in steps:
        done = subprocess.run([*prefix, *step], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise NoPostgres(f"{Path(step[0]).name} failed: {done.stderr.strip()[-500:]}")
    return Cluster(f"postgresql://postgres@127.0.0.1:{port}/postgres", folder, pg_ctl, prefix)


if __name__ == "__main__":
    cluster = start()
    print(cluster.dsn, flush=True)
    try:
        input("PostgreSQL is running; press Enter to stop it.\n")
    finally:
        cluster.stop()
