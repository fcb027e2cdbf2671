/* Tests for base/list.h: order, delete in the middle and during iteration, double delete. */
#include "kp-test.h"

#include "base/list.h"

struct item {
    int v;
    struct kp_list link;
};

static void test_order_and_delete(void **state)
{
    struct kp_list head = KP_LIST_HEAD_INIT(head);
    struct item it[5];
    struct kp_list *pos, *tmp;
    int expect[] = {4, 0, 2, 3}, i = 0;

    (void)state;
    assert_true(kp_list_empty(&head));
    assert_null(kp_list_first(&head));
    for (int k = 0; k < 4; k++) {
        it[k].v = k;
        kp_list_add_tail(&head, &it[k].link);
    }
    it[4].v = 4;
    kp_list_add_head(&head, &it[4].link);
    assert_int_equal(kp_list_count(&head), 5);
    kp_list_del(&it[1].link);
    kp_list_del(&it[1].link); /* harmless a second time */
    KP_LIST_FOREACH (pos, &head) {
        assert_int_equal(KP_LIST_ENTRY(pos, struct item, link)->v, expect[i++]);
    }
    assert_int_equal(i, 4);
    KP_LIST_FOREACH_SAFE (pos, tmp, &head) {
        kp_list_del(pos);
    }
    assert_true(kp_list_empty(&head));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_delete),
    };

    return kp_test_main("list", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
