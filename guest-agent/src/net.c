/*
 * Interface renames (ioctl) and permanent neighbours (rtnetlink) for the
 * boot-time network directives (PROTOCOL.md).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

static int set_name(int sock, const char *from, const char *to)
{
    struct ifreq ifr;

    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", from);
    snprintf(ifr.ifr_newname, sizeof(ifr.ifr_newname), "%s", to);
    return ioctl(sock, SIOCSIFNAME, &ifr);
}

int net_rename(const char *from, const char *to)
{
    static unsigned int spare;
    int sock, rc = 0;

    if ( strcmp(from, to) == 0 )
        return 0;
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if ( sock < 0 )
        return -1;
    if ( if_nametoindex(to) )
    {
        char aside[IFNAMSIZ];

        /* Its own rename directive, later in the list, finds it by MAC. */
        snprintf(aside, sizeof(aside), "selena%u", spare++);
        rc = set_name(sock, to, aside);
    }
    if ( rc == 0 )
        rc = set_name(sock, from, to);
    close(sock);
    return rc;
}

static int parse_mac(const char *text, unsigned char mac[6])
{
    unsigned int b[6];
    int i;

    if ( sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x", &b[0], &b[1], &b[2], &b[3],
                &b[4], &b[5]) != 6 )
        return -1;
    for ( i = 0; i < 6; i++ )
        mac[i] = (unsigned char)b[i];
    return 0;
}

/* Append an attribute to the netlink message at the start of buf. */
static void put_attr(char *buf, unsigned short type, const void *data, unsigned short len)
{
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct rtattr *a = (struct rtattr *)(buf + NLMSG_ALIGN(h->nlmsg_len));

    a->rta_type = type;
    a->rta_len = RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

int net_set_neighbour(const char *ifname, const char *ip, const char *mac)
{
    char req[NLMSG_SPACE(sizeof(struct ndmsg)) + 64] __attribute__((aligned(NLMSG_ALIGNTO)));
    struct nlmsghdr *h = (struct nlmsghdr *)req;
    struct ndmsg *nd = NLMSG_DATA(h);
    unsigned char addr[16], lladdr[6];
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    char reply[512];
    int family = strchr(ip, ':') ? AF_INET6 : AF_INET;
    unsigned int index = if_nametoindex(ifname);
    int sock;
    ssize_t got;

    if ( !index )
        return -1;
    if ( inet_pton(family, ip, addr) != 1 || parse_mac(mac, lladdr) )
    {
        errno = EINVAL;
        return -1;
    }
    memset(req, 0, sizeof(req));
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
    h->nlmsg_type = RTM_NEWNEIGH;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    h->nlmsg_seq = 1;
    nd->ndm_family = family;
    nd->ndm_ifindex = (int)index;
    nd->ndm_state = NUD_PERMANENT;
    put_attr(req, NDA_DST, addr, family == AF_INET6 ? 16 : 4);
    put_attr(req, NDA_LLADDR, lladdr, sizeof(lladdr));

    sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if ( sock < 0 )
        return -1;
    if ( sendto(sock, req, h->nlmsg_len, 0, (struct sockaddr *)&kernel,
                sizeof(kernel)) < 0 )
    {
        close(sock);
        return -1;
    }
    got = recv(sock, reply, sizeof(reply), 0);
    close(sock);
    if ( got < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) )
    {
        errno = EIO;
        return -1;
    }
    if ( ((struct nlmsghdr *)reply)->nlmsg_type == NLMSG_ERROR )
    {
        const struct nlmsgerr *err = NLMSG_DATA((struct nlmsghdr *)reply);

        if ( err->error )
        {
            errno = -err->error;
            return -1;
        }
    }
    return 0;
}

void net_no_dad(const char *ifname)
{
    char path[128];
    ssize_t written;
    int fd;

    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/accept_dad", ifname);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if ( fd < 0 )
        return;     /* no IPv6 in this kernel: nothing to skip */
    written = write(fd, "0", 1);
    (void)written;  /* best effort: a failure only delays the address by DAD */
    close(fd);
}
