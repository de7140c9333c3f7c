"""Reactive per-flow learning switch for selena's of-controller guest (os-ken app).

The controller of the SELENA paper's OpenFlow experiment (Section 3.5, Figure 11):
every new TCP or UDP flow reaches the controller as a packet_in and gets a flow
entry of its own, so the switch's control plane (flow insertion time, packet_in
rate) is on the path of every connection set-up.

Behaviour, per datapath:

* on connect: a table-miss entry (priority 0, output CONTROLLER with
  OFPCML_NO_BUFFER) in OpenFlow 1.3; OpenFlow 1.0 switches send table misses
  to the controller by themselves, so there only miss_send_len is raised;
* every packet_in teaches the source MAC's port (unicast sources only);
* IPv4 TCP/UDP to a known MAC: an exact entry on in_port + the 5-tuple with an
  idle timeout, then the packet itself is sent out (packet_out);
* other IPv4 to a known MAC (ICMP, ...): an entry on in_port + addresses +
  protocol number, so that pings do not visit the controller packet by packet
  and never shadow a TCP/UDP flow;
* ARP, other non-IP and broadcast/multicast: forwarded by MAC or flooded with
  a packet_out only, never a flow entry;
* unknown destination: flooded, no entry;
* OFPT_ERROR (a full table, a rejected flow_mod): logged with the request it
  answers, and the controller carries on (the packet was already sent out).

Settings, in os-ken's configuration (``--config-file``, group
``[selena_learning]``), whose defaults come from the environment:

=================  ==============================  =======
option             environment variable            default
=================  ==============================  =======
idle_timeout       SELENA_OF_IDLE_TIMEOUT (s)      10
hard_timeout       SELENA_OF_HARD_TIMEOUT (s)      0
flow_priority      SELENA_OF_FLOW_PRIORITY         100
=================  ==============================  =======
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    HANDSHAKE_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.lib.packet import ether_types, ethernet, ipv4, packet, tcp, udp
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_3

GROUP = "selena_learning"
IPPROTO_TCP = 6
IPPROTO_UDP = 17
# Remember this many of our recent flow_mods per switch, to name the rejected one.
PENDING_FLOW_MODS = 1024


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name}={raw!r} is not an integer") from exc


cfg.CONF.register_opts(
    [
        cfg.IntOpt(
            "idle_timeout",
            default=_env_int("SELENA_OF_IDLE_TIMEOUT", 10),
            min=0,
            max=65535,
            help="idle timeout (s) of per-flow entries; 0 = never",
        ),
        cfg.IntOpt(
            "hard_timeout",
            default=_env_int("SELENA_OF_HARD_TIMEOUT", 0),
            min=0,
            max=65535,
            help="hard timeout (s) of per-flow entries; 0 = never",
        ),
        cfg.IntOpt(
            "flow_priority",
            default=_env_int("SELENA_OF_FLOW_PRIORITY", 100),
            min=1,
            max=65535,
            help="priority of per-flow entries (the table-miss entry has 0)",
        ),
    ],
    group=GROUP,
)

# OFPET_* type name -> prefix of its code constants (same names in 1.0 and 1.3).
_CODE_PREFIX = {
    "OFPET_HELLO_FAILED": "OFPHFC_",
    "OFPET_BAD_REQUEST": "OFPBRC_",
    "OFPET_BAD_ACTION": "OFPBAC_",
    "OFPET_BAD_INSTRUCTION": "OFPBIC_",
    "OFPET_BAD_MATCH": "OFPBMC_",
    "OFPET_FLOW_MOD_FAILED": "OFPFMFC_",
    "OFPET_GROUP_MOD_FAILED": "OFPGMFC_",
    "OFPET_PORT_MOD_FAILED": "OFPPMFC_",
    "OFPET_TABLE_MOD_FAILED": "OFPTMFC_",
    "OFPET_QUEUE_OP_FAILED": "OFPQOFC_",
    "OFPET_SWITCH_CONFIG_FAILED": "OFPSCFC_",
    "OFPET_ROLE_REQUEST_FAILED": "OFPRRFC_",
    "OFPET_METER_MOD_FAILED": "OFPMMFC_",
    "OFPET_TABLE_FEATURES_FAILED": "OFPTFFC_",
}


def error_names(ofp: Any, err_type: int, code: int) -> tuple[str, str]:
    """Symbolic names of an OFPT_ERROR type and code in protocol module ``ofp``."""
    type_name = next(
        (n for n in dir(ofp) if n.startswith("OFPET_") and getattr(ofp, n) == err_type),
        f"type {err_type}",
    )
    prefix = _CODE_PREFIX.get(type_name)
    code_name = f"code {code}"
    if prefix is not None:
        code_name = next(
            (n for n in dir(ofp) if n.startswith(prefix) and getattr(ofp, n) == code),
            code_name,
        )
    return type_name, code_name


def is_unicast(mac: str) -> bool:
    return (int(mac.split(":", 1)[0], 16) & 1) == 0


class SelenaLearningSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION, ofproto_v1_0.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        conf = cfg.CONF[GROUP]
        self.idle_timeout: int = conf.idle_timeout
        self.hard_timeout: int = conf.hard_timeout
        self.flow_priority: int = conf.flow_priority
        # dpid -> MAC -> port
        self.mac_to_port: dict[int, dict[str, int]] = {}
        # dpid -> xid -> description of a flow_mod we sent (bounded)
        self.pending: dict[int, OrderedDict[int, str]] = {}
        self.errors = 0
        self.logger.info(
            "selena_learning: per-flow idle_timeout=%ds hard_timeout=%ds priority=%d",
            self.idle_timeout,
            self.hard_timeout,
            self.flow_priority,
        )

    # --- switch set-up --------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features_handler(self, ev: Any) -> None:
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        self.mac_to_port[dp.id] = {}
        self.pending[dp.id] = OrderedDict()
        if ofp.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
            actions = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            self._send_flow_mod(
                dp,
                parser.OFPFlowMod(
                    datapath=dp, priority=0, match=parser.OFPMatch(), instructions=inst
                ),
                "table-miss -> CONTROLLER",
            )
        else:
            # OpenFlow 1.0: misses go to the controller anyway; ask for whole packets.
            dp.send_msg(parser.OFPSetConfig(dp, ofp.OFPC_FRAG_NORMAL, 0xFFFF))
        self.logger.info("switch %016x connected (OpenFlow 0x%02x)", dp.id, ofp.OFP_VERSION)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def state_change_handler(self, ev: Any) -> None:
        dp = ev.datapath
        if dp.id is not None:
            self.mac_to_port.pop(dp.id, None)
            self.pending.pop(dp.id, None)
            self.logger.info("switch %016x disconnected", dp.id)

    # --- errors ---------------------------------------------------------------

    @set_ev_cls(
        ofp_event.EventOFPErrorMsg,
        [HANDSHAKE_DISPATCHER, CONFIG_DISPATCHER, MAIN_DISPATCHER],
    )
    def error_msg_handler(self, ev: Any) -> None:
        msg = ev.msg
        dp = msg.datapath
        self.errors += 1
        type_name, code_name = error_names(dp.ofproto, msg.type, msg.code)
        request = self.pending.get(dp.id or 0, {}).get(msg.xid, "an earlier request")
        self.logger.warning(
            "switch %s rejected %s (xid %d): %s %s; carrying on (%d errors so far)",
            f"{dp.id:016x}" if dp.id is not None else "?",
            request,
            msg.xid,
            type_name,
            code_name,
            self.errors,
        )

    # --- packets --------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in_handler(self, ev: Any) -> None:
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port: int = msg.match["in_port"] if ofp.OFP_VERSION >= 0x04 else msg.in_port

        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        if eth is None:
            return
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            return

        table = self.mac_to_port.setdefault(dp.id, {})
        if is_unicast(eth.src):
            table[eth.src] = in_port

        out_port: int | None = table.get(eth.dst) if is_unicast(eth.dst) else None
        if out_port == in_port:
            return  # would go back where it came from: drop
        if out_port is None:
            out_port = ofp.OFPP_FLOOD
        else:
            self._install_ip_flow(dp, in_port, out_port, pkt)

        data = msg.data if msg.buffer_id == ofp.OFP_NO_BUFFER else None
        dp.send_msg(
            parser.OFPPacketOut(
                datapath=dp,
                buffer_id=msg.buffer_id,
                in_port=in_port,
                actions=[parser.OFPActionOutput(out_port)],
                data=data,
            )
        )

    def _install_ip_flow(self, dp: Any, in_port: int, out_port: int, pkt: Any) -> None:
        """Install the entry for an IPv4 packet to a known port (nothing for non-IP)."""
        ip = pkt.get_protocol(ipv4.ipv4)
        if ip is None:
            return
        fields: dict[str, Any] = {"ip_proto": ip.proto, "src": ip.src, "dst": ip.dst}
        l4 = pkt.get_protocol(tcp.tcp) if ip.proto == IPPROTO_TCP else None
        if ip.proto == IPPROTO_UDP:
            l4 = pkt.get_protocol(udp.udp)
        if l4 is not None:
            fields["sport"] = l4.src_port
            fields["dport"] = l4.dst_port
        match = self._ip_match(dp, in_port, fields)
        actions = [dp.ofproto_parser.OFPActionOutput(out_port)]
        name = {IPPROTO_TCP: "tcp", IPPROTO_UDP: "udp"}.get(ip.proto, f"ip_proto={ip.proto}")
        sport = f":{fields['sport']}" if "sport" in fields else ""
        dport = f":{fields['dport']}" if "dport" in fields else ""
        desc = f"flow in_port={in_port} {name} {ip.src}{sport} -> {ip.dst}{dport} out={out_port}"
        self._send_flow_mod(dp, self._flow_mod(dp, match, actions), desc)

    def _ip_match(self, dp: Any, in_port: int, f: dict[str, Any]) -> Any:
        parser = dp.ofproto_parser
        proto = f["ip_proto"]
        if dp.ofproto.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
            kw: dict[str, Any] = {
                "in_port": in_port,
                "eth_type": ether_types.ETH_TYPE_IP,
                "ip_proto": proto,
                "ipv4_src": f["src"],
                "ipv4_dst": f["dst"],
            }
            if "sport" in f:
                l4 = "tcp" if proto == IPPROTO_TCP else "udp"
                kw[f"{l4}_src"] = f["sport"]
                kw[f"{l4}_dst"] = f["dport"]
            return parser.OFPMatch(**kw)
        kw = {
            "in_port": in_port,
            "dl_type": ether_types.ETH_TYPE_IP,
            "nw_proto": proto,
            "nw_src": f["src"],
            "nw_dst": f["dst"],
        }
        if "sport" in f:
            kw["tp_src"] = f["sport"]
            kw["tp_dst"] = f["dport"]
        return parser.OFPMatch(**kw)

    def _flow_mod(self, dp: Any, match: Any, actions: list[Any]) -> Any:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        common = {
            "datapath": dp,
            "match": match,
            "idle_timeout": self.idle_timeout,
            "hard_timeout": self.hard_timeout,
            "priority": self.flow_priority,
        }
        if ofp.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            return parser.OFPFlowMod(instructions=inst, **common)
        return parser.OFPFlowMod(command=ofp.OFPFC_ADD, actions=actions, **common)

    def _send_flow_mod(self, dp: Any, mod: Any, desc: str) -> None:
        xid = dp.set_xid(mod)
        pending = self.pending.setdefault(dp.id, OrderedDict())
        pending[xid] = desc
        while len(pending) > PENDING_FLOW_MODS:
            pending.popitem(last=False)
        dp.send_msg(mod)
        self.logger.debug("switch %016x: %s (xid %d)", dp.id, desc, xid)
