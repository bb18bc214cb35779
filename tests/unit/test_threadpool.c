/* test_threadpool.c: fork-join regions run every index exactly once (src/util/threadpool.c). */
#include <stdatomic.h>
#include <sched.h>
#include <stdlib.h>

#include "util/testutil.h"
#include "util/threadpool.h"

struct job {
    long n;
    int *hits;
    atomic_int calls;
};

static void mark(void *arg, int ith, int nth)
{
    struct job *j = arg;
    long i0, i1;
    threadpool_split(j->n, ith, nth, &i0, &i1);
    for (long i = i0; i < i1; i++)
        j->hits[i]++;
    atomic_fetch_add(&j->calls, 1);
}

static void test_split_covers_range_once(void **state)
{
    (void)state;
    for (long n = 0; n < 40; n++)
        for (int nth = 1; nth <= 7; nth++) {
            long prev = 0;
            for (int ith = 0; ith < nth; ith++) {
                long a, b;
                threadpool_split(n, ith, nth, &a, &b);
                assert_int_equal(a, prev);
                assert_true(b - a <= n / nth + 1);
                prev = b;
            }
            assert_int_equal(prev, n);
        }
}

static void test_many_regions_each_index_once(void **state)
{
    (void)state;
    for (int nth = 1; nth <= 4; nth++) {
        struct threadpool *tp = threadpool_new(nth);
        assert_non_null(tp);
        struct job j = {.n = 1001, .hits = calloc(1001, sizeof(int))};
        for (int r = 0; r < 2000; r++) {
            threadpool_run(tp, mark, &j);
            if (r == 1000) /* let every worker spin out and sleep, then wake them */
                while (threadpool_sleepers(tp) < nth - 1)
                    sched_yield();
        }
        for (long i = 0; i < j.n; i++)
            assert_int_equal(j.hits[i], 2000);
        assert_int_equal(atomic_load(&j.calls), 2000 * nth);
        free(j.hits);
        threadpool_free(tp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_covers_range_once),
        cmocka_unit_test(test_many_regions_each_index_once),
    };
    return cmocka_run_group_tests_name("threadpool", tests, NULL, NULL);
}
