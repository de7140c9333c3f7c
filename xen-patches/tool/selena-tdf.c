/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * selena-tdf: get or set the time dilation factor of a Xen domain.
 *
 *   selena-tdf get DOMID
 *   selena-tdf set DOMID TDF      (TDF may be a decimal such as 2.5)
 *
 * Issues XEN_DOMCTL_selena_tdf (added by selena's hypervisor patches)
 * through Debian's unmodified libxenctrl, so no Xen library is rebuilt.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xenctrl.h>

#include "tdf_parse.h"

/* Must match xen/include/public/domctl.h as patched. */
#define XEN_DOMCTL_selena_tdf     0x5e1e
#define XEN_DOMCTL_SELENA_TDF_GET 0
#define XEN_DOMCTL_SELENA_TDF_SET 1

struct selena_tdf_op {
    uint32_t op;
    uint32_t milli;
    uint32_t max_milli;
    uint32_t pad;
};

static const char *prog = "selena-tdf";

static void usage(void)
{
    fprintf(stderr,
            "usage: %s get DOMID\n"
            "       %s set DOMID TDF    (TDF from 1 to 1000, e.g. 10 or 2.5)\n",
            prog, prog);
    exit(2);
}

static int parse_domid(const char *s, uint32_t *domid)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if ( errno || end == s || *end || v >= DOMID_FIRST_RESERVED )
        return -1;
    *domid = v;
    return 0;
}

static int explain(int err, uint32_t domid, const struct selena_tdf_op *op)
{
    char buf[32];

    switch ( err )
    {
    case ESRCH:
        fprintf(stderr, "%s: no such domain: %u\n", prog, domid);
        break;
    case EPERM:
    case EACCES:
        fprintf(stderr, "%s: not privileged to %s the TDF of domain %u "
                "(run as root in Dom0; a domain cannot dilate itself)\n",
                prog, op->op == XEN_DOMCTL_SELENA_TDF_SET ? "set" : "get",
                domid);
        break;
    case ENOSYS:
        fprintf(stderr, "%s: the hypervisor is not patched for time "
                "dilation (XEN_DOMCTL_selena_tdf unknown)\n", prog);
        break;
    case EOPNOTSUPP:
        fprintf(stderr, "%s: domain %u is not a PV guest; only PV guests "
                "can be dilated\n", prog, domid);
        break;
    case EINVAL:
        tdf_format(op->max_milli ? op->max_milli : TDF_PARSE_MAX_MILLI,
                   buf, sizeof(buf));
        fprintf(stderr, "%s: TDF out of range for this host "
                "(1 to %s)\n", prog, buf);
        break;
    default:
        fprintf(stderr, "%s: domain %u: %s\n", prog, domid, strerror(err));
        break;
    }
    return 1;
}

int main(int argc, char **argv)
{
    struct xen_domctl domctl;
    struct selena_tdf_op op = { 0 };
    xc_interface *xch;
    uint32_t domid;
    char buf[32];
    int rc, err;

    if ( argc < 3 || parse_domid(argv[2], &domid) )
        usage();
    if ( !strcmp(argv[1], "get") && argc == 3 )
        op.op = XEN_DOMCTL_SELENA_TDF_GET;
    else if ( !strcmp(argv[1], "set") && argc == 4 )
    {
        op.op = XEN_DOMCTL_SELENA_TDF_SET;
        switch ( tdf_parse(argv[3], &op.milli) )
        {
        case TDF_PARSE_OK:
            break;
        case TDF_PARSE_RANGE:
            fprintf(stderr, "%s: TDF out of range: %s (1 to 1000)\n",
                    prog, argv[3]);
            return 2;
        case TDF_PARSE_PRECISION:
            fprintf(stderr, "%s: TDF has more than three decimals: %s\n",
                    prog, argv[3]);
            return 2;
        default:
            fprintf(stderr, "%s: TDF is not a number: %s\n", prog, argv[3]);
            return 2;
        }
    }
    else
        usage();

    xch = xc_interface_open(NULL, NULL, 0);
    if ( !xch )
    {
        fprintf(stderr, "%s: cannot open the Xen control interface "
                "(not in Dom0 of a Xen host, or not root)\n", prog);
        return 1;
    }

    memset(&domctl, 0, sizeof(domctl));
    domctl.cmd = XEN_DOMCTL_selena_tdf;
    domctl.interface_version = XEN_DOMCTL_INTERFACE_VERSION;
    domctl.domain = domid;
    memcpy(&domctl.u, &op, sizeof(op));

    rc = xc_domctl(xch, &domctl);
    err = errno;
    memcpy(&op, &domctl.u, sizeof(op));
    xc_interface_close(xch);

    if ( rc < 0 )
        return explain(err, domid, &op);

    if ( op.op == XEN_DOMCTL_SELENA_TDF_GET )
    {
        tdf_format(op.milli, buf, sizeof(buf));
        printf("%s\n", buf);
    }
    return 0;
}
