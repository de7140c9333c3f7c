"""A private Open vSwitch (ovsdb-server + ovs-vswitchd) in a temporary
directory, never the system's: a netdev bridge with dummy ports whose
controller the tests choose. Processes are stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OvsSandbox:
    def __init__(self, directory: Path):
        self.dir = directory
        self.env = {**os.environ, "OVS_RUNDIR": str(directory), "OVS_DBDIR": str(directory),
                    "OVS_LOGDIR": str(directory), "OVS_SYSCONFDIR": str(directory)}
        self.pids: list[int] = []

    def run(self, *argv: str) -> str:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def vsctl(self, *args: str) -> str:
        return self.run("ovs-vsctl", f"--db=unix:{self.dir}/db.sock", "--timeout=30", *args)

    def ofctl(self, *args: str) -> str:
        return self.run("ovs-ofctl", "-O", "OpenFlow13", *args)

    def start_daemons(self, dummy: str = "--enable-dummy") -> OvsSandbox:
        """ovsdb-server and ovs-vswitchd of this sandbox, no bridge yet;
        `dummy` is vswitchd's --enable-dummy option (=override: the system
        datapath and its ports become dummies too)."""
        if not SCHEMA.exists():
            raise RuntimeError("Open vSwitch is not installed (.ci/host-deps installs it)")
        d = self.dir
        self.run("ovsdb-tool", "create", f"{d}/conf.db", str(SCHEMA))
        self.run("ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock",
                 f"--unixctl={d}/ovsdb.ctl", f"--pidfile={d}/ovsdb.pid", "--detach",
                 f"--log-file={d}/ovsdb.log")
        self.pids.append(int((d / "ovsdb.pid").read_text()))
        self.vsctl("--no-wait", "init")
        self.run("ovs-vswitchd", f"unix:{d}/db.sock", dummy,
                 f"--unixctl={d}/vswitchd.ctl", f"--pidfile={d}/vswitchd.pid", "--detach",
                 f"--log-file={d}/vswitchd.log")
        self.pids.append(int((d / "vswitchd.pid").read_text()))
        return self

    def start(self) -> OvsSandbox:
        """The daemons and br0, a secure-mode netdev bridge with dummy ports p1, p2."""
        self.start_daemons()
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
                   "protocols=OpenFlow10,OpenFlow13", "fail-mode=secure",
                   "other-config:disable-in-band=true",
                   "--", "add-port", "br0", "p1", "--", "set", "interface", "p1", "type=dummy",
                   "ofport_request=1",
                   "--", "add-port", "br0", "p2", "--", "set", "interface", "p2", "type=dummy",
                   "ofport_request=2")
        return self

    @property
    def mgmt(self) -> str:
        return f"unix:{self.dir}/br0.mgmt"

    def set_controller(self, port: int | None) -> None:
        if port is None:
            self.vsctl("del-controller", "br0")
            return
        self.vsctl("set-controller", "br0", f"tcp:127.0.0.1:{port}", "--", "set",
                   "controller", "br0", "max_backoff=1000", "inactivity_probe=0")

    def stop(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
        self.pids.clear()
