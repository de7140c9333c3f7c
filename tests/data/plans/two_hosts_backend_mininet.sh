# selena plan wrote on stderr:
# the mininet backend runs in real time: TDF 1, not 10
# and on stdout:
# Mininet baseline of twohosts (real time, TDF 1)
net.addHost('h1')
net.addHost('h2')
net.addLink('h1', 'h2', cls=TCLink, intfName1='eth0', intfName2='eth0', bw=100.0, delay='5000us')
# in h1: ip addr add 10.0.0.1/24 dev eth0 && ip link set eth0 up
# in h1: ip link set eth0 txqueuelen 1000
# in h2: ip addr add 10.0.0.2/24 dev eth0 && ip link set eth0 up
# in h2: ip link set eth0 txqueuelen 1000
