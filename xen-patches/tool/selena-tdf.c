/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * selena-tdf: get or set the time dilation factor of a Xen domain.
 *
 *   selena-tdf get DOMID
 *   selena-tdf set DOMID... TDF   (TDF may be a decimal such as 2.5); several
 *                                 domains one right after another
 *   selena-tdf status DOMID       factor, frozen state, virtual and real now
 *   selena-tdf freeze DOMID...    stop the domains' virtual time, together
 *   selena-tdf thaw DOMID...      restart it, together, losing none; also
 *                                 what starts a restored or migrated
 *                                 domain (it arrives frozen)
 *   selena-tdf pause DOMID...     pause the domains (all of them or none)
 *   selena-tdf unpause DOMID...   unpause them, one right after another
 *   selena-tdf host               CPUs, free memory and Xen version, in the
 *                                 `key : value` lines of `xl info`
 *
 * pause and unpause do what `xl pause`/`xl unpause` do for a PV guest (the
 * only kind selena dilates) from one process, so an experiment's guests
 * start microseconds apart instead of one xl start-up (0.2 s under
 * emulation) apart; host answers what a deploy checks in a third of the
 * time `xl info` takes.  set of several domains changes them from one
 * process for the same reason: a running domain's clock changes rate at
 * its set, so domains set a process start-up apart drift apart by that
 * interval times the change of 1/TDF.
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
#define XEN_DOMCTL_SELENA_TDF_GET    0
#define XEN_DOMCTL_SELENA_TDF_SET    1
#define XEN_DOMCTL_SELENA_TDF_FREEZE 2
#define XEN_DOMCTL_SELENA_TDF_THAW   3
#define XEN_SELENA_TDF_F_FROZEN     (1U << 0)
#define XEN_SELENA_TDF_GROUP_MAX    256

struct selena_tdf_op {
    uint32_t op;
    uint32_t milli;
    uint32_t max_milli;
    uint32_t flags;
    uint64_t virt_ns;
    uint64_t real_ns;
    uint64_t group;      /* XEN_GUEST_HANDLE_64(uint16) */
    uint32_t nr_group;
    uint32_t pad;
};

static const char *prog = "selena-tdf";

static void usage(void)
{
    fprintf(stderr,
            "usage: %s get DOMID\n"
            "       %s set DOMID... TDF (TDF from 1 to 1000, e.g. 10 or 2.5)\n"
            "       %s status DOMID\n"
            "       %s freeze DOMID...  (stop virtual time, all at one instant)\n"
            "       %s thaw DOMID...    (restart it, all at one instant)\n"
            "       %s pause DOMID...   (all of them, or none on an error)\n"
            "       %s unpause DOMID... (each one; an error skips only that one)\n"
            "       %s host             (nr_cpus, free_memory in MB, Xen version)\n",
            prog, prog, prog, prog, prog, prog, prog, prog);
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
    case EACCES:
        /* Flask's refusal; the dummy policy's is EPERM. */
        fprintf(stderr, "%s: the XSM policy does not allow this domain to "
                "%s the time of domain %u (Flask: domain2:%s)\n", prog,
                op->op == XEN_DOMCTL_SELENA_TDF_GET ? "read" : "change",
                domid, op->op == XEN_DOMCTL_SELENA_TDF_GET ? "gettdf"
                                                          : "settdf");
        break;
    case EPERM:
        fprintf(stderr, "%s: not privileged to %s the time of domain %u "
                "(run as root in Dom0; Dom0, the hardware domain and the "
                "xenstore domain keep real time)\n",
                prog, op->op == XEN_DOMCTL_SELENA_TDF_GET ? "read" : "change",
                domid);
        break;
    case ENOSYS:
        fprintf(stderr, "%s: the hypervisor is not patched for time "
                "dilation (XEN_DOMCTL_selena_tdf unknown)\n", prog);
        break;
    case EOPNOTSUPP:
        fprintf(stderr, "%s: domain %u cannot be dilated: an HVM guest "
                "with Hyper-V enlightenments (viridian), or an HVM or PVH "
                "guest reading the hardware TSC (give it "
                "tsc_mode=\"always_emulate\"); xl dmesg names which\n",
                prog, domid);
        break;
    case EINVAL:
        tdf_format(op->max_milli ? op->max_milli : TDF_PARSE_MAX_MILLI,
                   buf, sizeof(buf));
        /* Only a domain reading the raw TSC has a cap below the range's. */
        fprintf(stderr, "%s: TDF out of range for domain %u (1 to %s%s)\n",
                prog, domid, buf,
                op->max_milli && op->max_milli < TDF_PARSE_MAX_MILLI
                ? ": its native TSC mode caps it on this CPU" : "");
        break;
    default:
        fprintf(stderr, "%s: domain %u: %s\n", prog, domid, strerror(err));
        break;
    }
    return 1;
}

static int domctl(xc_interface *xch, uint32_t domid, struct selena_tdf_op *op)
{
    struct xen_domctl domctl;
    int rc, err;

    memset(&domctl, 0, sizeof(domctl));
    domctl.cmd = XEN_DOMCTL_selena_tdf;
    domctl.interface_version = XEN_DOMCTL_INTERFACE_VERSION;
    domctl.domain = domid;
    memcpy(&domctl.u, op, sizeof(*op));

    rc = xc_domctl(xch, &domctl);
    err = errno;
    memcpy(op, &domctl.u, sizeof(*op));
    return rc < 0 ? err : 0;
}

/* FREEZE or THAW domids[0..n) at one instant: one domctl with a group. */
static int freeze_group(xc_interface *xch, uint32_t *domids, unsigned int n,
                        uint32_t which)
{
    DECLARE_HYPERCALL_BUFFER(uint16_t, group);
    struct selena_tdf_op op = { .op = which };
    unsigned int i;
    int err;

    if ( n > 1 )
    {
        group = xc_hypercall_buffer_alloc(xch, group,
                                          (n - 1) * sizeof(*group));
        if ( !group )
        {
            fprintf(stderr, "%s: out of memory\n", prog);
            return 1;
        }
        for ( i = 1; i < n; i++ )
            group[i - 1] = domids[i];
        op.group = HYPERCALL_BUFFER_AS_ARG(group);
        op.nr_group = n - 1;
    }
    err = domctl(xch, domids[0], &op);
    if ( n > 1 )
        xc_hypercall_buffer_free(xch, group);
    if ( err == ESRCH && n > 1 )
    {
        fprintf(stderr, "%s: no such domain among:", prog);
        for ( i = 0; i < n; i++ )
            fprintf(stderr, " %u", domids[i]);
        fputc('\n', stderr);
        return 1;
    }
    if ( err )
        return explain(err, domids[0], &op);
    printf("%s %u domain(s) at virtual %llu ns (Xen time %llu ns)\n",
           which == XEN_DOMCTL_SELENA_TDF_FREEZE ? "froze" : "thawed", n,
           (unsigned long long)op.virt_ns, (unsigned long long)op.real_ns);
    return 0;
}

/*
 * Set the factor of domids[0..n) in order; stop at the first refusal,
 * naming it: the ones before it keep the new factor.
 */
static int set_all(xc_interface *xch, const uint32_t *domids, unsigned int n,
                   uint32_t milli)
{
    struct selena_tdf_op op;
    unsigned int i;
    int err;

    for ( i = 0; i < n; i++ )
    {
        memset(&op, 0, sizeof(op));
        op.op = XEN_DOMCTL_SELENA_TDF_SET;
        op.milli = milli;
        err = domctl(xch, domids[i], &op);
        if ( err )
        {
            if ( i )
                fprintf(stderr, "%s: set %u of %u domain(s) before domain %u\n",
                        prog, i, n, domids[i]);
            return explain(err, domids[i], &op);
        }
    }
    return 0;
}

/* Pause domids[0..n) in order; on an error unpause the ones paused so far. */
static int pause_all(xc_interface *xch, const uint32_t *domids, unsigned int n)
{
    unsigned int i;

    for ( i = 0; i < n; i++ )
    {
        if ( xc_domain_pause(xch, domids[i]) == 0 )
            continue;
        fprintf(stderr, "%s: cannot pause domain %u: %s\n", prog, domids[i],
                strerror(errno));
        while ( i-- > 0 )
            xc_domain_unpause(xch, domids[i]);
        return 1;
    }
    return 0;
}

/* Unpause every domain that can be; name each one that cannot. */
static int unpause_all(xc_interface *xch, const uint32_t *domids,
                       unsigned int n)
{
    unsigned int i;
    int rc = 0;

    for ( i = 0; i < n; i++ )
        if ( xc_domain_unpause(xch, domids[i]) )
        {
            fprintf(stderr, "%s: cannot unpause domain %u: %s\n", prog,
                    domids[i], errno == EINVAL ? "it is not paused"
                                               : strerror(errno));
            rc = 1;
        }
    return rc;
}

static xc_interface *open_xc(void)
{
    xc_interface *xch = xc_interface_open(NULL, NULL, 0);

    if ( !xch )
        fprintf(stderr, "%s: cannot open the Xen control interface "
                "(not in Dom0 of a Xen host, or not root)\n", prog);
    return xch;
}

/* The fields of `xl info` a deploy checks, computed as xl computes them. */
static int host_info(xc_interface *xch)
{
    xc_physinfo_t info = { 0 };
    xen_extraversion_t extra = { 0 };
    int version;

    if ( xc_physinfo(xch, &info) )
    {
        fprintf(stderr, "%s: cannot read the host's physinfo: %s\n", prog,
                strerror(errno));
        return 1;
    }
    version = xc_version(xch, XENVER_version, NULL);
    if ( version < 0 || xc_version(xch, XENVER_extraversion, &extra) < 0 )
    {
        fprintf(stderr, "%s: cannot read the Xen version: %s\n", prog,
                strerror(errno));
        return 1;
    }
    extra[sizeof(extra) - 1] = '\0';
    printf("nr_cpus : %u\nfree_memory : %llu\n"
           "xen_major : %d\nxen_minor : %d\nxen_extra : %s\n",
           info.nr_cpus,
           (unsigned long long)(info.free_pages - info.outstanding_pages) /
           ((1U << 20) / XC_PAGE_SIZE),
           version >> 16, version & 0xffff, extra);
    return 0;
}

int main(int argc, char **argv)
{
    struct selena_tdf_op op = { 0 };
    uint32_t domids[XEN_SELENA_TDF_GROUP_MAX + 1];
    unsigned int n = 0;
    xc_interface *xch;
    char buf[32];
    int err, i, group_op = 0, pause_op = 0, set_op = 0;

    if ( argc == 2 && !strcmp(argv[1], "host") )
    {
        xch = open_xc();
        if ( !xch )
            return 1;
        err = host_info(xch);
        xc_interface_close(xch);
        return err;
    }
    if ( argc < 3 )
        usage();
    if ( !strcmp(argv[1], "pause") || !strcmp(argv[1], "unpause") )
        pause_op = argv[1][0] == 'p' ? 1 : 2;
    if ( pause_op || !strcmp(argv[1], "freeze") || !strcmp(argv[1], "thaw") )
    {
        group_op = !pause_op;
        op.op = argv[1][0] == 'f' ? XEN_DOMCTL_SELENA_TDF_FREEZE
                                  : XEN_DOMCTL_SELENA_TDF_THAW;
        if ( argc - 2 > XEN_SELENA_TDF_GROUP_MAX + 1 )
        {
            fprintf(stderr, "%s: at most %u domains at once\n", prog,
                    XEN_SELENA_TDF_GROUP_MAX + 1);
            return 2;
        }
        for ( i = 2; i < argc; i++ )
            if ( parse_domid(argv[i], &domids[n++]) )
                usage();
    }
    else if ( !strcmp(argv[1], "set") && argc >= 4 )
    {
        const char *tdf = argv[argc - 1];

        set_op = 1;
        op.op = XEN_DOMCTL_SELENA_TDF_SET;
        if ( argc - 3 > XEN_SELENA_TDF_GROUP_MAX + 1 )
        {
            fprintf(stderr, "%s: at most %u domains at once\n", prog,
                    XEN_SELENA_TDF_GROUP_MAX + 1);
            return 2;
        }
        for ( i = 2; i < argc - 1; i++ )
            if ( parse_domid(argv[i], &domids[n++]) )
                usage();
        switch ( tdf_parse(tdf, &op.milli) )
        {
        case TDF_PARSE_OK:
            break;
        case TDF_PARSE_RANGE:
            fprintf(stderr, "%s: TDF out of range: %s (1 to 1000)\n",
                    prog, tdf);
            return 2;
        case TDF_PARSE_PRECISION:
            fprintf(stderr, "%s: TDF has more than three decimals: %s\n",
                    prog, tdf);
            return 2;
        default:
            fprintf(stderr, "%s: TDF is not a number: %s\n", prog, tdf);
            return 2;
        }
    }
    else if ( parse_domid(argv[2], &domids[n++]) )
        usage();
    else if ( !strcmp(argv[1], "get") && argc == 3 )
        op.op = XEN_DOMCTL_SELENA_TDF_GET;
    else if ( !strcmp(argv[1], "status") && argc == 3 )
        op.op = XEN_DOMCTL_SELENA_TDF_GET;
    else
        usage();

    xch = open_xc();
    if ( !xch )
        return 1;

    if ( pause_op )
    {
        err = pause_op == 1 ? pause_all(xch, domids, n)
                            : unpause_all(xch, domids, n);
        xc_interface_close(xch);
        return err;
    }
    if ( group_op )
    {
        err = freeze_group(xch, domids, n, op.op);
        xc_interface_close(xch);
        return err;
    }
    if ( set_op )
    {
        err = set_all(xch, domids, n, op.milli);
        xc_interface_close(xch);
        return err;
    }

    err = domctl(xch, domids[0], &op);
    xc_interface_close(xch);
    if ( err )
        return explain(err, domids[0], &op);

    if ( op.op == XEN_DOMCTL_SELENA_TDF_GET )
    {
        tdf_format(op.milli, buf, sizeof(buf));
        if ( !strcmp(argv[1], "get") )
            printf("%s\n", buf);
        else
            printf("tdf %s\nfrozen %s\n"
                   "virtual_ns %llu\nreal_ns %llu\n", buf,
                   op.flags & XEN_SELENA_TDF_F_FROZEN ? "yes" : "no",
                   (unsigned long long)op.virt_ns,
                   (unsigned long long)op.real_ns);
    }
    return 0;
}
