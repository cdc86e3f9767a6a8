/* vmm_maps: a VMM handle's charge is settled only once it is released and
 * every mapping of it is unmapped, whatever order those come in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vmm_maps.h"

#define MIB (1ULL << 20)
#define VA (1ULL << 40)

/* What gs_vmm_unmapped reported. */
struct seen {
    int mappings;
    uint64_t charged;    /* the mappings' own charges, summed */
    int settled;         /* settles delivered */
    uint64_t settled_of; /* bytes of the last settle */
};

static void count(const struct gs_alloc_rec *charge, const struct gs_vmm_settle *settle, void *arg)
{
    struct seen *s = arg;
    s->mappings++;
    s->charged += charge->bytes;
    if (settle) {
        s->settled++;
        s->settled_of = settle->rec.bytes;
    }
}

static struct gs_vmm_settle own(uint64_t bytes)
{
    return (struct gs_vmm_settle){ .kind = GS_ALLOC_VMM, .rec = { .bytes = bytes } };
}

static void map(uint64_t va, uint64_t size, uint64_t handle, uint64_t charge)
{
    assert_int_equal(gs_vmm_map_room(), 0);
    struct gs_alloc_rec rec = { .bytes = charge };
    assert_int_equal(gs_vmm_map_add(va, size, handle, rec), 0);
}

static int teardown(void **state)
{
    (void)state;
    struct seen s = { 0 };
    gs_vmm_unmapped(0, UINT64_MAX, count, &s);
    gs_vmm_maps_set_max(GS_VMM_MAX_MAPS);
    assert_int_equal(gs_vmm_map_count(), 0);
    return 0;
}

static void test_an_unmapped_handle_is_settled_at_its_release(void **state)
{
    (void)state;
    struct gs_vmm_settle s = own(64 * MIB);
    assert_int_equal(gs_vmm_handle_released(7, &s), 0);
    map(VA, 64 * MIB, 7, 0);
    struct seen seen = { 0 };
    assert_int_equal(gs_vmm_unmapped(VA, 64 * MIB, count, &seen), 1);
    assert_int_equal(seen.settled, 0); /* not released yet: the caller settles at release */
    assert_int_equal(gs_vmm_handle_released(7, &s), 0);
    assert_int_equal(gs_vmm_handle_count(), 0);
}

static void test_a_release_while_mapped_is_settled_by_the_last_unmap(void **state)
{
    (void)state;
    map(VA, 64 * MIB, 7, 0);
    map(VA + 64 * MIB, 64 * MIB, 7, 0); /* the same handle twice */
    struct gs_vmm_settle s = own(64 * MIB);
    assert_int_equal(gs_vmm_handle_released(7, &s), 1);
    struct seen seen = { 0 };
    assert_int_equal(gs_vmm_unmapped(VA, 64 * MIB, count, &seen), 1);
    assert_int_equal(seen.settled, 0);
    assert_int_equal(gs_vmm_unmapped(VA + 64 * MIB, 64 * MIB, count, &seen), 1);
    assert_int_equal(seen.settled, 1);
    assert_int_equal(seen.settled_of, 64 * MIB);
    assert_int_equal(gs_vmm_handle_count(), 0);
}

static void test_one_unmap_covers_the_mappings_of_several_handles(void **state)
{
    (void)state;
    for (uint64_t i = 0; i < 4; i++) {
        map(VA + i * 2 * MIB, 2 * MIB, 100 + i, 0);
        struct gs_vmm_settle s = own(2 * MIB);
        assert_int_equal(gs_vmm_handle_released(100 + i, &s), 1);
    }
    map(VA + 8 * MIB, 2 * MIB, 200, 2 * MIB); /* past the range: stays */
    map(VA - 2 * MIB, 2 * MIB, 201, 2 * MIB); /* before it: stays */
    struct seen seen = { 0 };
    assert_int_equal(gs_vmm_unmapped(VA, 8 * MIB, count, &seen), 4);
    assert_int_equal(seen.settled, 4);
    assert_int_equal(seen.charged, 0);
    assert_int_equal(gs_vmm_map_count(), 2);
}

static void test_a_mapping_returns_its_own_charge(void **state)
{
    (void)state;
    map(VA, 32 * MIB, 9, 32 * MIB);
    map(VA + 32 * MIB, 32 * MIB, 9, 32 * MIB);
    struct seen seen = { 0 };
    assert_int_equal(gs_vmm_unmapped(VA, 64 * MIB, count, &seen), 2);
    assert_int_equal(seen.charged, 64 * MIB);
}

static void test_a_handle_value_handed_out_again_keeps_both_apart(void **state)
{
    (void)state;
    map(VA, 2 * MIB, 5, 0);
    struct gs_vmm_settle first = own(2 * MIB);
    assert_int_equal(gs_vmm_handle_released(5, &first), 1);
    map(VA + 2 * MIB, 4 * MIB, 5, 0); /* a new allocation under the old value */
    struct gs_vmm_settle second = own(4 * MIB);
    assert_int_equal(gs_vmm_handle_released(5, &second), 1);
    struct seen seen = { 0 };
    gs_vmm_unmapped(VA + 2 * MIB, 4 * MIB, count, &seen);
    assert_int_equal(seen.settled_of, 4 * MIB);
    gs_vmm_unmapped(VA, 2 * MIB, count, &seen);
    assert_int_equal(seen.settled, 2);
    assert_int_equal(seen.settled_of, 2 * MIB);
}

/* cuMemRetainAllocationHandle after the release: the handle is live again
 * and takes its settle back, so the last unmap settles nothing. */
static void test_a_handle_retained_after_its_release_takes_its_settle_back(void **state)
{
    (void)state;
    map(VA, 64 * MIB, 7, 0);
    map(VA + 64 * MIB, 64 * MIB, 8, 0);
    struct gs_vmm_settle s = own(64 * MIB), back = { 0 };
    assert_int_equal(gs_vmm_handle_released(7, &s), 1);
    assert_int_equal(gs_vmm_handle_revived(VA + 64 * MIB, 7, &back), 0); /* that mapping is 8's */
    assert_int_equal(gs_vmm_handle_revived(VA - 1, 7, &back), 0);        /* nothing mapped there */
    assert_int_equal(gs_vmm_handle_revived(VA + MIB, 7, &back), 1);
    assert_int_equal(back.kind, GS_ALLOC_VMM);
    assert_int_equal(back.rec.bytes, 64 * MIB);
    assert_int_equal(gs_vmm_handle_revived(VA, 7, &back), 0); /* live already */
    struct seen seen = { 0 };
    assert_int_equal(gs_vmm_unmapped(VA, 64 * MIB, count, &seen), 1);
    assert_int_equal(seen.settled, 0);
    /* released again, with no mapping left: the caller settles */
    assert_int_equal(gs_vmm_handle_released(7, &s), 0);
}

static void test_a_full_table_refuses_room(void **state)
{
    (void)state;
    gs_vmm_maps_set_max(2);
    map(VA, 2 * MIB, 1, 0);
    map(VA + 2 * MIB, 2 * MIB, 2, 0);
    assert_int_equal(gs_vmm_map_room(), -1);
    struct seen seen = { 0 };
    gs_vmm_unmapped(VA, 2 * MIB, count, &seen);
    assert_int_equal(gs_vmm_map_room(), 0);
}

static void test_many_mappings_in_any_order(void **state)
{
    (void)state;
    enum { N = 5000 };
    for (uint64_t i = 0; i < N; i++) {
        uint64_t k = (i * 7919) % N; /* a permutation of 0..N-1 */
        map(VA + k * 2 * MIB, 2 * MIB, 1000 + k % 50, 0);
    }
    for (uint64_t h = 0; h < 50; h++) {
        struct gs_vmm_settle s = own(h);
        assert_int_equal(gs_vmm_handle_released(1000 + h, &s), 1);
    }
    struct seen seen = { 0 };
    assert_int_equal(gs_vmm_unmapped(VA, (N / 2) * 2 * MIB, count, &seen), N / 2);
    assert_int_equal(seen.settled, 0); /* every handle keeps mappings in the other half */
    assert_int_equal(gs_vmm_unmapped(VA + (N / 2) * 2 * MIB, UINT64_MAX / 2, count, &seen), N / 2);
    assert_int_equal(seen.settled, 50);
    assert_int_equal(gs_vmm_handle_count(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_an_unmapped_handle_is_settled_at_its_release, teardown),
        cmocka_unit_test_teardown(test_a_release_while_mapped_is_settled_by_the_last_unmap, teardown),
        cmocka_unit_test_teardown(test_one_unmap_covers_the_mappings_of_several_handles, teardown),
        cmocka_unit_test_teardown(test_a_mapping_returns_its_own_charge, teardown),
        cmocka_unit_test_teardown(test_a_handle_value_handed_out_again_keeps_both_apart, teardown),
        cmocka_unit_test_teardown(test_a_handle_retained_after_its_release_takes_its_settle_back, teardown),
        cmocka_unit_test_teardown(test_a_full_table_refuses_room, teardown),
        cmocka_unit_test_teardown(test_many_mappings_in_any_order, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
