"""The Xenstore control channel between Dom0 and the guest agents
(guest-agent/PROTOCOL.md): wire client, protocol values, controller."""
