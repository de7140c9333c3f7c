"""Link shaping: one module per mechanism, each turning a link spec and a TDF
into exact `tc` argv lists.

Placement "dom0" (the default; works for any guest OS) shapes on the Dom0 side
of a guest's vif. Dom0 runs in real time, so time-based parameters are scaled:
rate / TDF, delay and jitter x TDF; queue sizes in packets and loss ratios are
not. Placement "guest" shapes inside a Linux guest on egress, where the clock
is already dilated, so nothing is scaled. A link's delay is one-way: each
direction's egress adds it once, so the round trip adds twice the delay.
"""

from selena.shaping.plan import Placement, shaping_commands

__all__ = ["Placement", "shaping_commands"]
