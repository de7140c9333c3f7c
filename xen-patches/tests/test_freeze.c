/*
 * User-space tests of common/time_dilation.c as the series leaves it
 * (extracted by scripts/extract-final-file.sh into build/freeze/), against
 * the stubs in tests/freeze_stubs: FREEZE/THAW of a group at one instant,
 * preempted and continued, aborted, a thaw releasing a pause left behind, a
 * restore arriving frozen until THAW, the architecture hook and the kick of
 * every vCPU on each change, the factor's cap per domain.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "time_dilation.c"
#include "muldiv64.h"

s_time_t test_now = 1000000000;
unsigned int test_preempt_every, test_preempt_calls;
static int failures;

#define CHECK(cond) do {                                               \
    if ( !(cond) )                                                     \
    {                                                                  \
        fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);     \
        failures++;                                                    \
    }                                                                  \
} while ( 0 )

int domain_tdf_may_change(struct domain *d)
{
    (void)d;
    return 0;
}

void arch_domain_tdf_changed(struct domain *d, s_time_t before, s_time_t after)
{
    (void)before;
    (void)after;
    d->arch_changes++;
}

uint32_t arch_domain_tdf_max(const struct domain *d)
{
    return d->arch_tdf_max ? d->arch_tdf_max : TDF_MILLI_MAX;
}

#define NR 4
static struct domain doms[NR];
static struct vcpu vcpus[NR][2];

static void setup(void)
{
    unsigned int i;

    memset(doms, 0, sizeof(doms));
    memset(vcpus, 0, sizeof(vcpus));
    for ( i = 0; i < NR; i++ )
    {
        tdf_anchor_init(&doms[i].tdf);
        doms[i].vcpu_list = &vcpus[i][0];
        vcpus[i][0].next_in_list = &vcpus[i][1];
        vcpus[i][0].domain = vcpus[i][1].domain = &doms[i];
    }
    vcpus[0][1].pause_flags = 1UL << _VPF_down;     /* one offline vCPU */
    test_preempt_every = test_preempt_calls = 0;
}

/* FREEZE/THAW the first n domains as the domctl does, continuing it. */
static unsigned int group_op(unsigned int n, bool freeze, uint64_t *virt)
{
    struct domain *g[NR];
    uint64_t real;
    unsigned int i, calls = 0;
    int rc;

    for ( i = 0; i < n; i++ )
        g[i] = &doms[i];
    do {
        calls++;
        rc = domain_tdf_freeze(g, n, freeze, virt, &real);
        test_now += 1000;           /* the continuation comes back later */
    } while ( rc == -ERESTART && calls < 100 );
    CHECK(rc == 0);
    return calls;
}

static void test_group_freeze_thaw(unsigned int preempt_every)
{
    uint64_t at_freeze, at_thaw;
    s_time_t v0[NR];
    unsigned int i, calls;

    setup();
    domain_set_tdf(&doms[1], 10000);
    test_now += 5000000;
    for ( i = 0; i < NR; i++ )
        v0[i] = domain_virt_now(&doms[i]);
    test_preempt_every = preempt_every;
    calls = group_op(3, true, &at_freeze);
    /* Preempted after each pause but the last: one call per domain. */
    CHECK(calls == (preempt_every == 1 ? 3 : 1));
    for ( i = 0; i < 3; i++ )
    {
        CHECK(doms[i].tdf_frozen && doms[i].pause_count == 1);
        CHECK(!doms[i].tdf_freeze_paused && !doms[i].tdf_group_act);
        CHECK(doms[i].arch_changes >= 1);       /* TDF 1 ones too */
    }
    CHECK(!doms[3].tdf_frozen && doms[3].pause_count == 0);
    /* One instant for all, and time stands still. */
    test_now += 3000000000LL;
    CHECK(domain_virt_now(&doms[0]) - v0[0] ==
          domain_virt_now(&doms[2]) - v0[2]);
    CHECK((uint64_t)domain_virt_now(&doms[0]) == at_freeze);

    /* Freezing again changes nothing, pauses nothing. */
    group_op(2, true, &at_freeze);
    CHECK(doms[0].pause_count == 1 && doms[1].pause_count == 1);

    group_op(3, false, &at_thaw);
    for ( i = 0; i < 3; i++ )
        CHECK(!doms[i].tdf_frozen && doms[i].pause_count == 0);
    /* No virtual time lost: TDF 1 domains continue from the freeze. */
    CHECK(at_thaw == at_freeze);
    test_now += 1000000;
    /* (group_op() moved the clock 1 us on after the thaw.) */
    CHECK((uint64_t)domain_virt_now(&doms[0]) == at_thaw + 1001000);
    CHECK((uint64_t)domain_virt_now(&doms[1]) ==
          (uint64_t)domain_virt_time(&doms[1], test_now - 1000000) + 100000);
}

static void test_aborted_freeze_releases_its_pauses(void)
{
    struct domain *g[NR] = { &doms[0], &doms[1], &doms[2] };
    uint64_t virt, real;

    setup();
    test_preempt_every = 1;
    CHECK(domain_tdf_freeze(g, 3, true, &virt, &real) == -ERESTART);
    CHECK(doms[0].pause_count == 1 && doms[0].tdf_freeze_paused);
    CHECK(domain_tdf_freeze(g, 3, true, &virt, &real) == -ERESTART);
    /* The continuation fails (a domain died): the marked pauses go. */
    domain_tdf_freeze_abort(g, 3);
    CHECK(doms[0].pause_count == 0 && doms[1].pause_count == 0);
    CHECK(!doms[0].tdf_frozen && !doms[0].tdf_freeze_paused);

    /* A continuation that never came back for domain 0: THAW releases it. */
    CHECK(domain_tdf_freeze(g, 3, true, &virt, &real) == -ERESTART);
    test_preempt_every = 0;
    group_op(1, false, &virt);
    CHECK(doms[0].pause_count == 0 && !doms[0].tdf_freeze_paused);
}

static void test_restore_arrives_frozen_until_thaw(void)
{
    uint64_t virt;
    s_time_t deadline;

    setup();
    vcpus[2][0].singleshot_timer.active = true;
    vcpus[2][0].tdf_singleshot_deadline = 7000000000LL + 2000000;
    CHECK(domain_tdf_restore(&doms[2], 2000, 7000000000LL) == 0);
    CHECK(doms[2].tdf_frozen && doms[2].pause_count == 1);
    /* A second restore (before the first unpause) takes no second pause. */
    CHECK(domain_tdf_restore(&doms[2], 2000, 7000000000LL) == 0);
    CHECK(doms[2].pause_count == 1);
    test_now += 9000000000LL;
    CHECK(domain_virt_now(&doms[2]) == 7000000000LL);
    group_op(3, false, &virt);
    CHECK(!doms[2].tdf_frozen && doms[2].pause_count == 0);
    /* Virtual time continues from the saved value at the thaw, at TDF 2. */
    CHECK(domain_virt_now(&doms[2]) == 7000000000LL + 1000 / 2);
    /* The pending timer, 2 ms of virtual time away, fires 4 ms after the thaw. */
    deadline = vcpus[2][0].singleshot_timer.expires;
    CHECK(vcpus[2][0].singleshot_timer.active);
    CHECK(deadline - (test_now - 1000) == 4000000);
    /* A domain that has run is refused. */
    doms[2].creation_finished = true;
    CHECK(domain_tdf_restore(&doms[2], 2000, 1) == -EBUSY);
}

static void test_every_change_kicks_every_vcpu_up(void)
{
    uint64_t virt;

    setup();
    domain_set_tdf(&doms[0], 5000);
    group_op(1, true, &virt);
    group_op(1, false, &virt);
    CHECK(vcpus[0][0].kicks == 3 && vcpus[0][0].tdf_time_stale);
    CHECK(vcpus[0][1].kicks == 0);              /* offline */
    CHECK(doms[0].arch_changes == 3);
    CHECK(doms[1].arch_changes == 0 && vcpus[1][0].kicks == 0);
}

/*
 * The factor's cap is the domain's own (a native TSC's, from the
 * architecture): above it SET and a restore are refused and change nothing;
 * a domain without one takes any valid factor.
 */
static void test_the_cap_is_the_domains_own(void)
{
    setup();
    doms[0].arch_tdf_max = 4000;
    CHECK(domain_set_tdf(&doms[0], 5000) == -EINVAL);
    CHECK(domain_tdf_restore(&doms[0], 5000, 7000000000LL) == -EINVAL);
    CHECK(doms[0].tdf.milli == TDF_MILLI_UNIT && !doms[0].tdf_frozen);
    CHECK(doms[0].pause_count == 0 && doms[0].arch_changes == 0);
    CHECK(domain_set_tdf(&doms[0], 4000) == 0 && doms[0].tdf.milli == 4000);
    CHECK(domain_set_tdf(&doms[1], TDF_MILLI_MAX) == 0);
    CHECK(doms[1].tdf.milli == TDF_MILLI_MAX);
}

int main(void)
{
    test_group_freeze_thaw(0);
    test_group_freeze_thaw(1);
    test_aborted_freeze_releases_its_pauses();
    test_restore_arrives_frozen_until_thaw();
    test_every_change_kicks_every_vcpu_up();
    test_the_cap_is_the_domains_own();
    if ( failures )
    {
        fprintf(stderr, "freeze/thaw: %d check(s) failed\n", failures);
        return 1;
    }
    printf("freeze/thaw: all checks passed\n");
    return 0;
}
