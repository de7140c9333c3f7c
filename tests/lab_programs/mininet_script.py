"""A Mininet-style script on selena (tests/lab/test_mininet_e2e.py runs it in
the lab's Dom0): start, pingAll, pingAllFull, h1.cmd('ping ...' % h2.IP()),
h2.sendCmd and waitOutput (Mininet's multiping.py way), waitListening
before and while busybox's nc listens in h2, staticArp on the started net,
h2.popen of nc and h1.pexec sending it a line, h1.monitor() reading a
ping's first reply while it runs, pmonitor reading two
pings' lines while they run (Mininet's popenpoll.py way),
h1.intf().config(delay=...) reshaping the link, stop. Its link class is
custom(TCLink, delay='10ms'), whose delay goes over the link's own 5 ms,
as in Mininet. With --forget it never
calls net.stop(): selena stops the net at exit."""

import sys

from selena.mininet import Mininet, TCLink, Topo
from selena.mininet.util import custom, pmonitor, waitListening


class MnPairTopo(Topo):
    def build(self):
        h1 = self.addHost('h1')
        h2 = self.addHost('h2')
        self.addLink(h1, h2, bw=10, delay='5ms')


net = Mininet(topo=MnPairTopo(), link=custom(TCLink, delay='10ms'), tdf=2)
net.start()
print('dropped=%r' % net.pingAll())
print('rtts=%r' % [rtt[3] for _, _, rtt in net.pingAllFull()])
h1, h2 = net.get('h1', 'h2')
print(h1.cmd('ping -c1 %s' % h2.IP()))
h2.sendCmd('ping -c1', h1.IP())
print('waiting=%r' % h2.waiting)
print(h2.waitOutput())
print('listening-before=%r' % waitListening(h1, h2, 5001, timeout=1))
h2.sendCmd('nc -l -p 5001')
print('listening=%r' % waitListening(h1, h2.IP(), 5001, timeout=10))
h2.sendInt()
h2.waitOutput()
net.staticArp()
print(h1.cmd('arp -n'))
server = h2.popen('nc -l -p 5002')
print('popen-listening=%r' % waitListening(h1, h2, 5002, timeout=10))
print('pexec=%r' % (h1.pexec('echo hello | nc -w 2 %s 5002' % h2.IP(), shell=True),))
print('popen-out=%r' % ((server.communicate(timeout=60)[0], server.returncode),))
h1.sendCmd('ping -c3', h2.IP())
seen = ''
while 'bytes from' not in seen and h1.waiting:
    seen += h1.monitor(timeoutms=5000)
early = h1.waiting
seen += h1.waitOutput()
print('monitor=%r' % ((early, seen.count('bytes from')),))
pings = {h1: h1.popen('ping -c3 %s' % h2.IP()), h2: h2.popen('ping -c3 %s' % h1.IP())}
replies, while_running = 0, 0
for host, line in pmonitor(pings, timeoutms=500):
    if host and 'bytes from' in line:
        replies += 1
        while_running += pings[host].poll() is None
print('pmonitor=%r' % ((replies, while_running > 0),))
h1.intf().config(delay='30ms')
print('rtts-after=%r' % [rtt[3] for _, _, rtt in net.pingAllFull()])
if '--forget' not in sys.argv:
    net.stop()
    print('stopped')
