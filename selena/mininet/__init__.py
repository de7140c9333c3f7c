"""Mininet's API with Mininet's meanings, on selena.

Scripts import it as `from selena.mininet import Mininet, Topo, TCLink`;
custom files written for `mn --custom FILE --topo NAME` load unchanged with
`selena run|validate|plan --custom FILE --topo NAME`: while selena loads such
a file, `import mininet...` gives these modules (selena.mininet.custom), so
the meaning is selena's whether or not Mininet is installed. A plain script
that imports `mininet` itself gets Mininet, not selena.

The units are Mininet's: bw in Mbit/s, delay and jitter as tc times ('5ms'),
loss in percent, max_queue_size in packets; docs/topologies.md maps every
option and lists what is refused.
"""

from selena.mininet.link import Link, TCLink
from selena.mininet.net import Mininet
from selena.mininet.node import (
    CPULimitedHost,
    DefaultController,
    Host,
    OVSBridge,
    OVSKernelSwitch,
    OVSSwitch,
)
from selena.mininet.topo import (
    LinearTopo,
    MinimalTopo,
    SingleSwitchReversedTopo,
    SingleSwitchTopo,
    Topo,
)

__all__ = ["CPULimitedHost", "DefaultController", "Host", "LinearTopo", "Link", "Mininet",
           "MinimalTopo", "OVSBridge", "OVSKernelSwitch", "OVSSwitch",
           "SingleSwitchReversedTopo", "SingleSwitchTopo", "TCLink", "Topo"]
