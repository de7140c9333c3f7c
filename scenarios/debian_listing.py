# SELENA's own style (the paper's Listings 1 and 2) with a full Debian
# guest: m1 boots the debian template with memcached from Debian's archive
# (the same image variant scenarios/debian_memcached.py uses), H1 is a
# tools host that stores and reads a value over the link. Link rate is in
# Mbit/s and latency in ms, as in the paper.
#
#     selena lab build --scenario scenarios/debian_listing.py   # the variant, once
#     selena run scenarios/debian_listing.py
newNode(0, "m1", NodeType.DEBIAN_HOST,
        [(1000, "RANDOM", "10.0.7.2", "255.255.255.0", "")], 2, None, "128M",
        packages=["memcached"])
newNode(1, "H1", NodeType.LINUX_HOST,
        [(1000, "RANDOM", "10.0.7.1", "255.255.255.0", "")], 1, None, None)
newLink((0, 0), (1, 0), 100, 1)
setArp(1, "eth1", "10.0.7.2", "fe:ff:ff:00:07:02")
# Debian's memcached listens on localhost: open it to the link and wait
# for the socket.
pushCmd(0, ["sed -i 's/^-l 127.0.0.1/-l 0.0.0.0/' /etc/memcached.conf && "
            "systemctl restart memcached && for i in $(seq 100); do "
            "ss -ltn | grep -q ':11211 ' && exit 0; sleep 0.1; done; exit 1",
            "ip -br addr show dev eth1"])
pushCmd(1, [r"printf 'set listing 0 0 7\r\ndebian!\r\nget listing\r\nquit\r\n' | "
            "nc -w 5 10.0.7.2 11211"])
