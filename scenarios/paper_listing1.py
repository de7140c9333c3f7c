# The SELENA paper's Listings 1 and 2 (ANCS'14), verbatim where the paper is
# complete. The paper elides H2's and the switch's arguments ("....."): they
# are filled in here with H2 = 10.0.1.3 and a switch with two unaddressed
# ports. Link rate is in Mbit/s and latency in ms, as in the paper.
# Node-0 (H1)
newNode(
  0, "H1", # unique ID, name label
  NodeType.LINUX_HOST, # guest template
  [ (1000, # 1st interface, queue len
    "RANDOM", # MAC address
    "10.0.1.2", # IP address
    "255.255.255.0", # NetMask
    "10.0.1.1"), # Gateway
  ], # additional interfaces
  1, # number of VCPUs
  "4,5,6,7", # VCPU Mask
  "512M" ) # Guest RAM
# Node-1 (H2)
newNode(1, "H2", NodeType.LINUX_HOST,
        [(1000, "RANDOM", "10.0.1.3", "255.255.255.0", "10.0.1.1")], 1, "4,5,6,7", "512M")
# Node-2 (Switch)
newNode(2, "Switch", NodeType.LINUX_OVS,
        [(1000, "RANDOM", "", "0.0.0.0", ""), (1000, "RANDOM", "", "0.0.0.0", "")],
        1, "2,3", "512M")
# Link: H1<-->Switch
newLink(
  (0, 0), # Node-0, 1st interface
  (2, 0), # Node-2, 1st interface
  1000, # Link speed in Mbps
  0.2 ) # Latency (NetEm params)
# Link: H2<-->Switch
newLink( (1, 0), (2, 1), 1000, 0.2 )

# Listing 2
# Prevent arp broadcasts
setArp(0, "eth1", "10.0.1.3", "fe:ff:ff:00:01:03")
setArp(1, "eth1", "10.0.1.2", "fe:ff:ff:00:01:02")
# Configure the switch
pushCmd(2, ["ovs-vsctl set-fail-mode br0 secure"])
pushCmd(2, ["ovs-vsctl add-port br0 eth1"])
pushCmd(2, ["ovs-vsctl add-port br0 eth2"])
pushOFRule(2,
  "br0", "add-flow", "in_port=1,action=output:2")
pushOFRule(2,
  "br0", "add-flow", "in_port=2,action=output:1")
# Run netperf for 10 seconds
pushCmd(0,
  ["netperf -H 10.0.1.3 -t TCP_STREAM -i10 -D1"])
