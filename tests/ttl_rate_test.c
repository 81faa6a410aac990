/*
 * ttl_rate_test: --ttl-max-deletes-per-sec bounds TTL deletes on every node,
 * and everything due is still deleted. Three real nodes run with a limit of
 * RATE deletes/s; ITEMS items fall due in the same second. At every poll
 * both the deletions the nodes report and the items a read of every key no
 * longer finds must stay within what the limit allows since that second
 * (RATE per second per node plus the 100 ms burst the token bucket holds):
 * as many items as the limit keeps must still be there. Reads must see
 * deletion under way (some items gone, some not) at several polls, and
 * every item gone in the end, by the counter and by the reads.
 *
 * The bound is an upper bound: a slow machine deletes more slowly, never
 * faster, so the test cannot fail from load. Without the limit the whole
 * burst goes in well under a second and the first poll fails.
 */
#include "testutil.h"

#include <time.h>

#include "scrape.h"

#define RATE 40
#define RATE_STR "40"
#define ITEMS 360
#define NODES 3

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* How many of the ITEMS items a read of every key finds. Reads do not hide
 * expired items by default (docs/ttl.md), so an item found is one the TTL
 * has not deleted yet. */
static int present(lapse_client *cl)
{
    int found = 0;
    for (int at = 0; at < ITEMS; at += LAPSE_BATCH_GET_MAX) {
        int m = ITEMS - at < LAPSE_BATCH_GET_MAX ? ITEMS - at : LAPSE_BATCH_GET_MAX;
        lapse_item *keys[LAPSE_BATCH_GET_MAX], *got[LAPSE_BATCH_GET_MAX];
        for (int i = 0; i < m; i++) {
            keys[i] = item_json("{\"Id\":{\"S\":\"i%d\"}}", at + i);
        }
        lapse_error e = {0};
        int rv = lapse_batch_get(cl, "Limited", keys, (size_t)m, got, &e);
        for (int i = 0; i < m; i++) {
            lapse_item_free(keys[i]);
            if (rv == 0) {
                found += got[i] != NULL;
                lapse_item_free(got[i]);
            }
        }
        assert_lapse_ok(rv, &e);
    }
    return found;
}

/* lapse_ttl_deleted_items_total of the table, summed over the nodes. */
static double deleted(cluster *c)
{
    double sum = 0;
    for (int n = 1; n <= NODES; n++) {
        char *body = scrape_get(cluster_metrics_addr(c, n), 2000);
        if (body == NULL) {
            fail_msg("cannot scrape node %d's /metrics", n);
        }
        sum += scrape_sum(body, "lapse_ttl_deleted_items_total", "table=\"Limited\"");
        free(body);
    }
    return sum;
}

static void deletes_stay_within_the_limit(void **state)
{
    (void)state;
    cluster_options o = {0};
    o.nodes = NODES;
    o.node_args = "--ttl-max-deletes-per-sec " RATE_STR;
    o.quiet = 1;
    o.metrics = 1;
    cluster *c = NULL;
    char err[512];
    if (cluster_start(&c, &o, err, sizeof(err)) != 0) {
        fail_msg("cluster_start: %s", err);
    }
    lapse_client *cl = connect_client(c);
    lapse_error e = {0};
    lapse_table_def d = {0};
    d.name = "Limited";
    d.partition_key = "Id";
    d.partition_key_type = 'S';
    d.partitions = 16;
    assert_lapse_ok(lapse_create_table(cl, &d, &e), &e);
    lapse_ttl_spec spec = {0};
    spec.action = LAPSE_TTL_ENABLE;
    spec.attribute = "Exp";
    assert_lapse_ok(lapse_update_ttl(cl, "Limited", &spec, NULL, &e), &e);

    /* All due in one second, written before it. */
    const int64_t due_s = wall_ms() / 1000 + 3;
    for (int i = 0; i < ITEMS; i++) {
        lapse_item *it = item_json("{\"Id\":{\"S\":\"i%d\"},\"Exp\":{\"N\":\"%lld\"}}", i,
                                   (long long)due_s);
        assert_lapse_ok(lapse_put(cl, "Limited", it, NULL, &e), &e);
        lapse_item_free(it);
    }
    if (wall_ms() >= due_s * 1000) {
        fail_msg("loading %d items took past their due instant", ITEMS);
    }

    const double burst = RATE / 10.0;
    double got = 0;
    int left = ITEMS, polls = 0, partial = 0;
    const int64_t give_up = due_s * 1000 + 60000;
    while (got < ITEMS || left > 0) {
        if (wall_ms() > give_up) {
            fail_msg("60 s after their due instant: %.0f of %d due items counted deleted, %d "
                     "still read",
                     got, ITEMS, left);
        }
        sleep_ms(100);
        got = deleted(c);
        left = present(cl);
        const int64_t after = wall_ms();
        if (after <= due_s * 1000) {
            /* Nothing before the due instant, by either account. */
            assert_true(got == 0);
            assert_int_equal(left, ITEMS);
            continue;
        }
        double allowed = NODES * (burst + RATE * (double)(after - due_s * 1000) / 1000.0);
        if (got > allowed) {
            fail_msg("%.0f deletes %lld ms after the due instant; the limit allows %.0f", got,
                     (long long)(after - due_s * 1000), allowed);
        }
        if (ITEMS - left > allowed) {
            fail_msg("%d items gone by a read %lld ms after the due instant; the limit allows "
                     "%.0f",
                     ITEMS - left, (long long)(after - due_s * 1000), allowed);
        }
        partial += left > 0 && left < ITEMS;
        polls++;
    }
    /* The check ran while deletion was under way, not only at the end, and
     * the reads saw it under way too. */
    assert_true(polls >= 5);
    if (partial < 3) {
        fail_msg("reads saw deletion under way at %d polls of %d, want >= 3", partial, polls);
    }
    printf("ttl_rate_test: %d polls, %d with some items gone and some left\n", polls, partial);
    lapse_close(cl);
    int crashed = cluster_crashed(c, NULL);
    cluster_free(c, crashed < 0);
    assert_true(crashed < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deletes_stay_within_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
