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
 *   selena-tdf align DOMID REF    start the clock of DOMID, a domain that
 *                                 has never run, at REF's virtual time and
 *                                 wall clock (a node restarted mid-run)
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
#include <xen/hvm/save.h>

#include "tdf_parse.h"

/* Must match xen/include/public/domctl.h as patched. */
#define XEN_DOMCTL_selena_tdf     0x5e1e
#define XEN_DOMCTL_SELENA_TDF_GET    0
#define XEN_DOMCTL_SELENA_TDF_SET    1
#define XEN_DOMCTL_SELENA_TDF_FREEZE 2
#define XEN_DOMCTL_SELENA_TDF_THAW   3
#define XEN_SELENA_TDF_F_FROZEN     (1U << 0)
#define XEN_SELENA_TDF_GROUP_MAX    256
/* The pseudo MSRs save/restore carries a dilated domain's time in. */
#define XEN_SELENA_TDF_MSR_FACTOR 0x5e1e0000U
#define TIME_MSRS 3     /* factor, virtual system time, wall clock (ns) */

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
            "       %s align DOMID REF  (DOMID never run: start its clock at REF's)\n"
            "       %s pause DOMID...   (all of them, or none on an error)\n"
            "       %s unpause DOMID... (each one; an error skips only that one)\n"
            "       %s host             (nr_cpus, free_memory in MB, Xen version)\n",
            prog, prog, prog, prog, prog, prog, prog, prog, prog);
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

/* Is the domain an HVM container (PVH or HVM)?  0, or an errno. */
static int domain_is_hvm(xc_interface *xch, uint32_t domid, int *hvm)
{
    xc_dominfo_t info;

    if ( xc_domain_getinfo(xch, domid, 1, &info) != 1 || info.domid != domid )
        return ESRCH;
    *hvm = info.hvm;
    return 0;
}

/* Keep a time pseudo MSR (index, value) in val; bit i of *seen: val[i]. */
static void take_time_msrs(uint32_t index, uint64_t value, uint64_t val[],
                           unsigned int *seen)
{
    unsigned int i = index - XEN_SELENA_TDF_MSR_FACTOR;

    if ( index < XEN_SELENA_TDF_MSR_FACTOR || i >= TIME_MSRS )
        return;
    val[i] = value;
    *seen |= 1U << i;
}

/*
 * The time pseudo MSRs of vCPU 0, as a save reads them: *found is 0 when
 * the domain is not dilated (its clock reads real time).  A PV domain's
 * come with XEN_DOMCTL_get_vcpu_msrs, an HVM container's in the CPU_MSR
 * record of its HVM context.  0, or an errno.
 */
static int read_time_msrs(xc_interface *xch, uint32_t domid, int hvm,
                          uint64_t val[], int *found)
{
    unsigned int seen = 0, i, count;
    int err = 0;

    if ( hvm )
    {
        uint8_t buf[4096];
        const struct hvm_msr *ctxt = (const void *)buf;

        memset(buf, 0, sizeof(buf));
        if ( xc_domain_hvm_getcontext_partial(xch, domid, CPU_MSR_CODE, 0,
                                              buf, sizeof(buf)) )
        {
            /* No MSR to save on vCPU 0: no record at all. */
            *found = 0;
            return errno == ENOENT || errno == ENODATA ? 0 : errno;
        }
        count = ctxt->count;
        if ( offsetof(struct hvm_msr, msr) + count * sizeof(ctxt->msr[0]) >
             sizeof(buf) )
            return EOVERFLOW;
        for ( i = 0; i < count; i++ )
            take_time_msrs(ctxt->msr[i].index, ctxt->msr[i].val, val, &seen);
    }
    else
    {
        DECLARE_HYPERCALL_BUFFER(xen_domctl_vcpu_msr_t, msrs);
        struct xen_domctl domctl;

        /* A null buffer asks for the number of MSRs. */
        memset(&domctl, 0, sizeof(domctl));
        domctl.cmd = XEN_DOMCTL_get_vcpu_msrs;
        domctl.interface_version = XEN_DOMCTL_INTERFACE_VERSION;
        domctl.domain = domid;
        domctl.u.vcpu_msrs.vcpu = 0;
        if ( xc_domctl(xch, &domctl) )
            return errno;
        count = domctl.u.vcpu_msrs.msr_count;
        msrs = xc_hypercall_buffer_alloc(xch, msrs, (count + 1) * sizeof(*msrs));
        if ( !msrs )
            return ENOMEM;
        domctl.u.vcpu_msrs.msr_count = count;
        set_xen_guest_handle(domctl.u.vcpu_msrs.msrs, msrs);
        if ( xc_domctl(xch, &domctl) )
            err = errno;
        else
            for ( i = 0; i < domctl.u.vcpu_msrs.msr_count; i++ )
                take_time_msrs(msrs[i].index, msrs[i].value, val, &seen);
        xc_hypercall_buffer_free(xch, msrs);
    }
    *found = seen == (1U << TIME_MSRS) - 1;
    return err;
}

/*
 * Write the time pseudo MSRs to vCPU 0 of a domain that has never run, as
 * a restore does: the hypervisor moves its clock there and leaves it
 * frozen.  A PV domain takes them with XEN_DOMCTL_set_vcpu_msrs; an HVM
 * container only in a whole HVM context (its load downs every vCPU whose
 * record is missing), so its own is read, vCPU 0's CPU_MSR record given
 * the three, and loaded back.  0, or an errno.
 */
static int write_time_msrs(xc_interface *xch, uint32_t domid, int hvm,
                           const uint64_t val[])
{
    unsigned int i;
    int err = 0;

    if ( hvm )
    {
        uint8_t *old, *new;
        uint32_t len, off = 0, out = 0;
        int size = xc_domain_hvm_getcontext(xch, domid, NULL, 0), got, done = 0;
        /* Room for vCPU 0's record to grow by three MSRs, or to be added. */
        size_t room = sizeof(struct hvm_save_descriptor) +
                      offsetof(struct hvm_msr, msr) +
                      TIME_MSRS * sizeof(struct hvm_one_msr);

        if ( size <= 0 )
            return size < 0 ? errno : EINVAL;
        old = malloc(size);
        new = malloc(size + room);
        if ( !old || !new )
        {
            free(old);
            free(new);
            return ENOMEM;
        }
        got = xc_domain_hvm_getcontext(xch, domid, old, size);
        len = got < 0 ? 0 : got;
        if ( got < 0 )
            err = errno;
        while ( !err && off + sizeof(struct hvm_save_descriptor) <= len )
        {
            const struct hvm_save_descriptor *d = (const void *)(old + off);
            struct hvm_save_descriptor *nd = (void *)(new + out);
            const uint8_t *data = old + off + sizeof(*d);

            if ( off + sizeof(*d) + d->length > len )
            {
                err = EPROTO;
                break;
            }
            if ( (d->typecode == CPU_MSR_CODE && d->instance == 0) ||
                 (d->typecode == 0 && !done) )
            {
                /* vCPU 0's MSRs but the time ones, then the time ones. */
                struct hvm_msr *m = (void *)(new + out + sizeof(*nd));
                const struct hvm_msr *om = (const void *)data;
                unsigned int n = d->typecode ? om->count : 0;

                m->count = 0;
                for ( i = 0; i < n; i++ )
                    if ( om->msr[i].index - XEN_SELENA_TDF_MSR_FACTOR >=
                         TIME_MSRS )
                        m->msr[m->count++] = om->msr[i];
                for ( i = 0; i < TIME_MSRS; i++ )
                {
                    m->msr[m->count].index = XEN_SELENA_TDF_MSR_FACTOR + i;
                    m->msr[m->count]._rsvd = 0;
                    m->msr[m->count++].val = val[i];
                }
                nd->typecode = CPU_MSR_CODE;
                nd->instance = 0;
                nd->length = offsetof(struct hvm_msr, msr) +
                             m->count * sizeof(m->msr[0]);
                out += sizeof(*nd) + nd->length;
                done = 1;
                if ( d->typecode )
                {
                    off += sizeof(*d) + d->length;
                    continue;
                }
                nd = (void *)(new + out);
            }
            memcpy(nd, d, sizeof(*d) + d->length);
            out += sizeof(*d) + d->length;
            off += sizeof(*d) + d->length;
            if ( d->typecode == 0 )
                break;
        }
        if ( !err && !done )
            err = EPROTO;       /* no END record */
        if ( !err && xc_domain_hvm_setcontext(xch, domid, new, out) )
            err = errno;
        free(old);
        free(new);
    }
    else
    {
        DECLARE_HYPERCALL_BUFFER(xen_domctl_vcpu_msr_t, msrs);
        struct xen_domctl domctl;

        msrs = xc_hypercall_buffer_alloc(xch, msrs, TIME_MSRS * sizeof(*msrs));
        if ( !msrs )
            return ENOMEM;
        memset(msrs, 0, TIME_MSRS * sizeof(*msrs));
        for ( i = 0; i < TIME_MSRS; i++ )
        {
            msrs[i].index = XEN_SELENA_TDF_MSR_FACTOR + i;
            msrs[i].value = val[i];
        }
        memset(&domctl, 0, sizeof(domctl));
        domctl.cmd = XEN_DOMCTL_set_vcpu_msrs;
        domctl.interface_version = XEN_DOMCTL_INTERFACE_VERSION;
        domctl.domain = domid;
        domctl.u.vcpu_msrs.vcpu = 0;
        domctl.u.vcpu_msrs.msr_count = TIME_MSRS;
        set_xen_guest_handle(domctl.u.vcpu_msrs.msrs, msrs);
        if ( xc_domctl(xch, &domctl) )
            err = errno;
        xc_hypercall_buffer_free(xch, msrs);
    }
    return err;
}

/*
 * Start the clock of `domid`, created paused and never run, at the virtual
 * time and wall clock of `ref`, a running domain: the restore path of the
 * hypervisor (pseudo MSRs) moves it there, frozen, and a THAW starts it.
 * A new domain's clock reads real time until its factor is set, so a node
 * restarted mid-run would otherwise be ahead of the others by the real
 * time the run gained on virtual time.  `ref` is only read.  Twice: the
 * reference runs on while the clock is moved, so the first pass measures
 * by how much, and the second (allowed: the domain has still never run)
 * moves it that much further.
 */
static int align(xc_interface *xch, uint32_t domid, uint32_t ref)
{
    struct selena_tdf_op mine = { .op = XEN_DOMCTL_SELENA_TDF_GET };
    struct selena_tdf_op theirs, thaw;
    uint64_t val[TIME_MSRS] = { 0 }, lead = 0;
    int64_t off = 0;
    int hvm, ref_hvm, found, err, pass;

    if ( (err = domain_is_hvm(xch, domid, &hvm)) )
        return explain(err, domid, &mine);
    if ( (err = domain_is_hvm(xch, ref, &ref_hvm)) )
        return explain(err, ref, &mine);
    if ( (err = domctl(xch, domid, &mine)) )
        return explain(err, domid, &mine);
    /* The wall clock: the new domain's own, else the reference's. */
    err = read_time_msrs(xch, domid, hvm, val, &found);
    if ( !err && !found )
        err = read_time_msrs(xch, ref, ref_hvm, val, &found);
    if ( err )
    {
        fprintf(stderr, "%s: cannot read the time of domain %u or %u: %s\n",
                prog, domid, ref, strerror(err));
        return 1;
    }
    if ( !found )
    {
        /* Neither is dilated: both clocks read real time already. */
        printf("domain %u reads the time of domain %u already (real time)\n",
               domid, ref);
        return 0;
    }
    for ( pass = 0; pass < 2; pass++ )
    {
        memset(&theirs, 0, sizeof(theirs));
        theirs.op = XEN_DOMCTL_SELENA_TDF_GET;
        if ( (err = domctl(xch, ref, &theirs)) )
            return explain(err, ref, &theirs);
        if ( theirs.flags & XEN_SELENA_TDF_F_FROZEN )
        {
            fprintf(stderr, "%s: domain %u is frozen: thaw it first\n", prog,
                    ref);
            return 1;
        }
        val[0] = mine.milli;
        val[1] = theirs.virt_ns + lead;
        if ( (err = write_time_msrs(xch, domid, hvm, val)) )
        {
            fprintf(stderr, "%s: domain %u's clock cannot be moved (%s): "
                    "only a domain that has never run can be\n", prog, domid,
                    strerror(err));
            return 1;
        }
        memset(&thaw, 0, sizeof(thaw));
        thaw.op = XEN_DOMCTL_SELENA_TDF_THAW;
        if ( (err = domctl(xch, domid, &thaw)) )
            return explain(err, domid, &thaw);
        /* How far the reference ran from its reading to the thaw. */
        lead = (thaw.real_ns - theirs.real_ns) * 1000 / theirs.milli;
        off = (int64_t)(val[1] - (theirs.virt_ns + lead));
    }
    printf("domain %u started at domain %u's virtual time, %+lld ns from "
           "it\n", domid, ref, (long long)off);
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
    if ( argc == 4 && !strcmp(argv[1], "align") )
    {
        uint32_t ref;

        if ( parse_domid(argv[2], &domids[0]) || parse_domid(argv[3], &ref) )
            usage();
        xch = open_xc();
        if ( !xch )
            return 1;
        err = align(xch, domids[0], ref);
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
