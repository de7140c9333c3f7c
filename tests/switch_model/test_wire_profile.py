"""Framing, the message bodies the model reads, table accounting for both
OpenFlow versions, and profile files (each bad field named)."""

from __future__ import annotations

import asyncio
import struct

import pytest
from ofmodel import wire
from ofmodel.ofclient import flow_mod, ipv4_dst_match, oxm_match
from ofmodel.profile import ProfileError, load_profile, parse_profile
from ofmodel.proxy import FlowTable


def read_all(chunks: list[bytes]) -> list[bytes | Exception]:
    """Messages framed from a stream delivered in the given pieces."""
    async def main():
        reader = asyncio.StreamReader()
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        found: list[bytes | Exception] = []
        while True:
            try:
                msg = await wire.read_message(reader)
            except wire.MalformedMessage as exc:
                found.append(exc)
                return found
            if msg is None:
                return found
            found.append(msg)
    return asyncio.run(main())


def test_messages_are_framed_across_arbitrary_splits():
    a = wire.message(wire.OF13, wire.ECHO_REQUEST, 1, b"x" * 100)
    b = wire.message(wire.OF10, wire.HELLO, 2)
    stream = a + b
    for cut in (1, 7, 8, 9, 107, 108, 109):
        assert read_all([stream[:cut], stream[cut:]]) == [a, b]
    assert read_all([bytes([b]) for b in stream]) == [a, b]


@pytest.mark.parametrize("data, why", [
    (struct.pack("!BBHI", 4, 0, 7, 1), "less than the header"),
    (struct.pack("!BBHI", 4, 0, 64, 1) + b"abc", "short of the length"),
    (b"\x04\x00\x00", "inside a header"),
])
def test_unframeable_input_is_reported(data, why):
    (error,) = read_all([data])
    assert isinstance(error, wire.MalformedMessage) and why in str(error)


def test_flow_mod_fields_of_openflow_13():
    msg = flow_mod(9, wire.ADD, ipv4_dst_match(5), table=3, priority=77, flags=2)
    fm = wire.parse_flow_mod(wire.OF13, msg)
    assert (fm.command, fm.table, fm.priority, fm.flags) == (wire.ADD, 3, 77, 2)
    assert fm.match == ipv4_dst_match(5)[:18]             # unpadded OXM match
    flagged = wire.with_flags(msg, fm, 3)
    assert wire.parse_flow_mod(wire.OF13, flagged).flags == 3 and len(flagged) == len(msg)
    assert wire.parse_flow_mod(wire.OF13, msg[:40]) is None


def of10_flow_mod(command: int, nw_dst: int, priority: int = 10, flags: int = 0) -> bytes:
    wildcards = 0x3FFFFF & ~(0x3F << 14)                  # nw_dst exact
    match = struct.pack("!IH6s6sHBxHBB2xIIHH", wildcards, 0, b"\0" * 6, b"\0" * 6, 0, 0,
                        0x0800, 0, 0, 0, nw_dst, 0, 0)
    body = match + struct.pack("!QHHHHIHH", 0, command, 0, 0, priority, 0xFFFFFFFF, 0xFFFF,
                               flags)
    return wire.message(wire.OF10, wire.FLOW_MOD, 1, body)


def test_flow_mod_fields_of_openflow_10():
    msg = of10_flow_mod(wire.MODIFY_STRICT, 42, priority=5, flags=1)
    fm = wire.parse_flow_mod(wire.OF10, msg)
    assert (fm.command, fm.table, fm.priority, fm.flags) == (wire.MODIFY_STRICT, 0, 5, 1)
    assert len(fm.match) == 40


def test_table_accounting_openflow_13():
    table = FlowTable(capacity=2)
    v = wire.OF13

    def fm(cmd, i, table_id=0, priority=100):
        return wire.parse_flow_mod(v, flow_mod(1, cmd, ipv4_dst_match(i), table=table_id,
                                               priority=priority))

    assert table.admit(v, fm(wire.ADD, 1), 0) and table.admit(v, fm(wire.ADD, 2), 1)
    assert table.admit(v, fm(wire.ADD, 2), 1), "same match and priority replaces"
    assert not table.admit(v, fm(wire.ADD, 3), 0)
    assert table.admit(v, fm(wire.MODIFY, 3), 0) and len(table.entries) == 2, \
        "1.3 MODIFY never adds"
    assert table.admit(v, fm(wire.DELETE, 1), 0) and len(table.entries) == 1
    key2 = fm(wire.ADD, 2).key
    assert table.removed(key2) is True and table.entries == {}
    table.admit(v, fm(wire.ADD, 4), 0)
    assert table.removed(fm(wire.ADD, 4).key) is False, "the model asked, not the controller"
    table.admit(v, fm(wire.ADD, 5, table_id=1), 0)
    table.admit(v, fm(wire.ADD, 6, table_id=2), 0)
    delete_all = wire.parse_flow_mod(v, flow_mod(1, wire.DELETE, oxm_match(),
                                                 table=wire.OFPTT_ALL))
    assert table.admit(v, delete_all, 0) and table.entries == {}


def test_table_accounting_openflow_10_modify_adds():
    table = FlowTable(capacity=1)
    v = wire.OF10
    assert table.admit(v, wire.parse_flow_mod(v, of10_flow_mod(wire.MODIFY, 1)), 0)
    assert len(table.entries) == 1, "1.0 MODIFY of an absent flow adds it"
    assert not table.admit(v, wire.parse_flow_mod(v, of10_flow_mod(wire.ADD, 2)), 0)


def test_table_full_errors_use_each_versions_codes():
    msg = flow_mod(0x1234, wire.ADD, ipv4_dst_match(1))
    t13, t10 = wire.TYPES[wire.OF13], wire.TYPES[wire.OF10]
    err = wire.error(wire.OF13, 0x1234, t13.flow_mod_failed, t13.table_full, msg)
    header = wire.parse_header(err)
    assert (header.type, header.xid) == (wire.ERROR, 0x1234)
    assert struct.unpack_from("!HH", err, 8) == (5, 1)       # FLOW_MOD_FAILED, TABLE_FULL
    assert err[12:] == msg[:64]
    assert (t10.flow_mod_failed, t10.table_full) == (3, 0)   # FLOW_MOD_FAILED, ALL_TABLES_FULL


def test_shipped_profiles_load():
    pica8 = load_profile("pica8-p3290")
    assert pica8.flow_mod_delay.median_s == pytest.approx(0.006)
    assert pica8.packet_in_delay_s == pytest.approx(0.002)
    assert pica8.packet_in_rate == 50
    assert "SELENA" in pica8.provenance["source"]
    ideal = load_profile("ideal")
    assert ideal.flow_mod_delay.is_zero and ideal.packet_in_rate is None
    assert ideal.table_capacity is None


@pytest.mark.parametrize("data, message", [
    ({"name": "x", "flow_mod": {"delay": {"distribution": "normal"}}},
     "x.flow_mod.delay.distribution: want constant, uniform or empirical"),
    ({"name": "x", "flow_mod": {"delay": {"distribution": "constant", "ms": -1}}},
     "flow_mod.delay.ms: want a number >= 0"),
    ({"name": "x", "flow_mod": {"delay": {"distribution": "empirical", "samples_ms": [1, "a"]}}},
     "samples_ms[1]: want a number >= 0"),
    ({"name": "x", "packet_in": {"max_rate": 0}}, "packet_in.max_rate: want a number >= 0.001"),
    ({"name": "x", "packet_in": {"burst": 0}}, "packet_in.burst: want an integer >= 1"),
    ({"name": "x", "table": {"capacity": "big"}}, "table.capacity: want an integer >= 1"),
    ({"name": "x", "speed": 1}, "unknown field(s) speed"),
    ({"flow_mod": {}}, "name: want a non-empty string"),
])
def test_bad_profiles_name_the_field(data, message):
    with pytest.raises(ProfileError) as info:
        parse_profile(data, "x")
    assert message in str(info.value)


def test_empirical_distribution_samples_its_values():
    import random
    profile = parse_profile({"name": "e", "flow_mod": {"delay": {
        "distribution": "empirical", "samples_ms": [1, 2, 30]}}})
    rng = random.Random(1)
    seen = {profile.flow_mod_delay.sample(rng) for _ in range(200)}
    assert seen == {0.001, 0.002, 0.03}
    assert parse_profile(profile_roundtrip(profile)).flow_mod_delay == profile.flow_mod_delay


def profile_roundtrip(profile):
    import yaml
    return yaml.safe_load(profile.to_yaml())
