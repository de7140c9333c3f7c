"""selena's OpenFlow switch control-plane model.

A proxy on the OpenFlow channel between a switch datapath (Open vSwitch in a
switch guest) and its controller that makes the control plane behave like a
given hardware switch (a profile): flow_mod insertion delay, packet_in delay
and rate limit, flow table capacity, barrier and stats reply latency. It runs
in the switch guest, so every delay is in the guest's dilated time.
"""

__version__ = "1.0"
