"""Mininet's emptynet.py way of building a net, on selena.mininet: a
Mininet() without a topo, every node added to it, then start()
(tests/lab/test_mn_habits_e2e.py runs it in the lab's Dom0;
tests/test_mininet_api.py validates it, which stops at start())."""

from selena.mininet.net import Mininet
from selena.mininet.node import Controller


def empty_net() -> None:
    net = Mininet(controller=Controller, waitConnected=True, tdf=5)
    net.addController('c0')
    h1 = net.addHost('h1', ip='10.0.0.1')
    h2 = net.addHost('h2', ip='10.0.0.2')
    s3 = net.addSwitch('s3')
    net.addLink(h1, s3)
    net.addLink(h2, s3)
    net.start()
    print('connected', net.waitConnected())
    print('pairdropped', net.pingPair())
    net.stop()


if __name__ == '__main__':
    empty_net()
