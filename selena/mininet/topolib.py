"""Mininet's topolib: TreeTopo and TorusTopo, named and numbered as Mininet's."""

from __future__ import annotations

from selena.mininet.topo import Topo


class TreeTopo(Topo):
    """A switch tree of the given depth and fanout; hosts h1.., switches s1.."""

    # A Mininet topology's build() takes its own arguments, not Topo's.
    def build(self, depth: int = 1, fanout: int = 2) -> None:  # type: ignore[override]
        self.hostNum = 1
        self.switchNum = 1
        self.addTree(depth, fanout)

    def addTree(self, depth: int, fanout: int) -> str:  # noqa: N802 - Mininet's name
        if depth > 0:
            node = self.addSwitch(f"s{self.switchNum}")
            self.switchNum += 1
            for _ in range(fanout):
                child = self.addTree(depth - 1, fanout)
                self.addLink(node, child)
        else:
            node = self.addHost(f"h{self.hostNum}")
            self.hostNum += 1
        return node


class TorusTopo(Topo):
    """An x by y torus of switches (loops: its switches run the spanning tree)."""

    # A Mininet topology's build() takes its own arguments, not Topo's.
    def build(self, x: int, y: int, n: int = 1) -> None:  # type: ignore[override]
        if x < 3 or y < 3:
            raise ValueError("TorusTopo: x and y must be at least 3")
        switches = {}
        for i in range(1, x + 1):
            for j in range(1, y + 1):
                loc = f"{i}x{j}"
                switch = switches[i, j] = self.addSwitch(f"s{loc}", stp=True)
                for k in range(1, n + 1):
                    host = self.addHost(f"h{loc}" if n == 1 else f"h{loc}_{k}")
                    self.addLink(host, switch)
        for i in range(1, x + 1):
            for j in range(1, y + 1):
                self.addLink(switches[i, j], switches[i, j % y + 1])
                self.addLink(switches[i, j], switches[i % x + 1, j])
