"""Custom topology example, in the shape of Mininet's own
examples/custom/topo-2sw-2host.py (our text):

   host --- switch --- switch --- host

Adding the 'topos' dict with a key/value pair to generate our newly defined
topology enables one to pass in '--topo=mytopo' from the command line.
"""

from mininet.topo import Topo


class MyTopo( Topo ):
    "Simple topology example."

    def build( self ):
        "Create custom topo."

        # Add hosts and switches
        leftHost = self.addHost( 'h1' )
        rightHost = self.addHost( 'h2' )
        leftSwitch = self.addSwitch( 's3' )
        rightSwitch = self.addSwitch( 's4' )

        # Add links
        self.addLink( leftHost, leftSwitch )
        self.addLink( leftSwitch, rightSwitch )
        self.addLink( rightSwitch, rightHost )


class ShapedTopo( MyTopo ):
    "The same, with the switches' link shaped as TCLink shapes it."

    def build( self ):
        leftHost = self.addHost( 'h1' )
        rightHost = self.addHost( 'h2' )
        leftSwitch = self.addSwitch( 's3' )
        rightSwitch = self.addSwitch( 's4' )
        self.addLink( leftHost, leftSwitch )
        self.addLink( leftSwitch, rightSwitch, bw=10, delay='5ms', loss=1,
                      max_queue_size=100, use_htb=True )
        self.addLink( rightSwitch, rightHost )


class LineTopo( Topo ):
    "n switches in a line, one host on each, every link shaped alike."

    def build( self, n=2, bw=None, delay=None ):
        last = None
        for i in range( 1, n + 1 ):
            host = self.addHost( 'h%s' % i )
            switch = self.addSwitch( 's%s' % i )
            self.addLink( host, switch, bw=bw, delay=delay )
            if last:
                self.addLink( switch, last, bw=bw, delay=delay )
            last = switch


topos = { 'mytopo': ( lambda: MyTopo() ), 'shaped': ShapedTopo, 'line': LineTopo }
