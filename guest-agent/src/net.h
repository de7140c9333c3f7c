/*
 * Network configuration the agent does itself, without tools that a minimal
 * guest may lack (busybox has no neighbour replace, its arp is IPv4 only).
 */
#ifndef SELENA_NET_H
#define SELENA_NET_H

/*
 * Rename interface `from` to `to` (the interface must be down, as it is at
 * boot). An unrelated interface already called `to` is moved aside to a
 * temporary name first, so a set of renames can be applied in any order.
 * Returns 0, or -1 with errno set.
 */
int net_rename(const char *from, const char *to);

/* Add or replace a permanent neighbour entry (IPv4 ARP or IPv6 NDP) on
 * interface `ifname`. Returns 0, or -1 with errno set. */
int net_set_neighbour(const char *ifname, const char *ip, const char *mac);

/* Skip IPv6 duplicate address detection on `ifname`, so its addresses are
 * usable at once (every address in an experiment is unique by validation). */
void net_no_dad(const char *ifname);

#endif /* SELENA_NET_H */
