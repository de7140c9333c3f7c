# selena plan wrote on stderr:
# the mininet backend runs in real time: TDF 1, not 5
# and on stdout:
# Mininet baseline of ovsstandalone (real time, TDF 1)
net.addHost('h1')
net.addHost('h2')
net.addSwitch('s1', cls=OVSBridge, stp=False)
net.addLink('h1', 's1', cls=TCLink, intfName1='eth0', intfName2='s1-eth1', delay='1000us')
net.addLink('h2', 's1', cls=TCLink, intfName1='eth0', intfName2='s1-eth2', delay='1000us')
# in h1: ip addr add 10.0.0.1/24 dev eth0 && ip link set eth0 up
# in h1: ip link set eth0 txqueuelen 1000
# in h2: ip addr add 10.0.0.2/24 dev eth0 && ip link set eth0 up
# in h2: ip link set eth0 txqueuelen 1000
