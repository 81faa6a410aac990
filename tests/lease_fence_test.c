/*
 * lease_fence_test: a primary acts only under its etcd lease
 * (docs/replication.md, "Leases and fencing"), on one etcd member, a
 * coordinator and three real nodes:
 *  - etcd stalled (SIGSTOP): no node can renew its lease, and no
 *    coordinator can change the map, so every primary stays primary in
 *    every map; still, within seconds every write and strongly consistent
 *    read of a three-copy table is refused, naming the lease, while a
 *    one-copy table (no one to be fenced from) goes on. etcd back, writes
 *    go on again and every copy ends in sync and equal;
 *  - a primary stalled (SIGSTOP) past its lease is failed over and a newer
 *    value is written through the new primary; a read sent to the old
 *    primary by a client whose map still names it is answered after the
 *    stall ends (SIGCONT) before that node has any newer map: it is refused,
 *    and the client's retry reads the newer value, never the old one.
 *    (Without the fence the old primary serves the read from its old map:
 *    seen failing so.)
 */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "../common/clock.h"
#include "etcd_members.h"
#include "replset_testutil.h"
#include "testmap.h"

#define PARTS 4

static void create(const char *name, unsigned partitions, unsigned replication)
{
    lapse_table_def d = {.name = name,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = partitions,
                         .replication = replication};
    lapse_error e = {0};
    int rv = 0;
    for (int i = 0; i < 200; i++) { /* a coordinator may be taking the lead again */
        if ((rv = lapse_create_table(rs_client(), &d, &e)) != LAPSE_EUNAVAILABLE) {
            break;
        }
        rs_sleep_ms(100);
    }
    assert_lapse_ok(rv, &e);
}

static lapse_client *client_with_timeout(int timeout_ms)
{
    lapse_client *cl = NULL;
    lapse_error e = {0};
    assert_lapse_ok(
        lapse_connect_timeout(&cl, cluster_coordinator_url(rs_cluster()), timeout_ms, &e), &e);
    return cl;
}

static int put(lapse_client *cl, const char *table, const char *id, const char *v, lapse_error *e)
{
    lapse_item *it = item_json("{\"Id\":{\"S\":\"%s\"},\"V\":{\"S\":\"%s\"}}", id, v);
    int rv = lapse_put(cl, table, it, NULL, e);
    lapse_item_free(it);
    return rv;
}

/* Gets Id=id from table; *v gets its V ("" for no item; caller frees). */
static int get(lapse_client *cl, const char *table, const char *id, char **v, lapse_error *e)
{
    lapse_item *k = item_json("{\"Id\":{\"S\":\"%s\"}}", id), *out = NULL;
    int rv = lapse_get(cl, table, k, &out, e);
    lapse_item_free(k);
    *v = NULL;
    if (rv == 0) {
        const char *s = out != NULL ? lapse_item_get_s(out, "V") : NULL;
        *v = strdup(s != NULL ? s : "");
    }
    lapse_item_free(out);
    return rv;
}

/* put and get, sent again (up to three times) while they get no answer in
 * time: on a loaded machine (sanitizers, two cores) a call of the 300 ms
 * client can time out, which neither acknowledges nor refuses it. */
#define ANSWER_TRIES 4

static int put_answered(lapse_client *cl, const char *table, const char *id, const char *v,
                        lapse_error *e)
{
    int rv = LAPSE_ETIMEDOUT;
    for (int i = 0; rv == LAPSE_ETIMEDOUT && i < ANSWER_TRIES; i++) {
        rv = put(cl, table, id, v, e);
    }
    return rv;
}

static int get_answered(lapse_client *cl, const char *table, const char *id, char **v,
                        lapse_error *e)
{
    int rv = LAPSE_ETIMEDOUT;
    for (int i = 0; rv == LAPSE_ETIMEDOUT && i < ANSWER_TRIES; i++) {
        free(*v);
        *v = NULL;
        rv = get(cl, table, id, v, e);
    }
    return rv;
}

static void test_no_primary_acts_while_etcd_is_stalled(void **state)
{
    (void)state;
    create("rf3", PARTS, 3);
    create("rf1", PARTS, 1);
    lapse_error e = {0};
    char id[16];
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof(id), "k%d", i);
        assert_lapse_ok(put(rs_client(), "rf3", id, "before", &e), &e);
        assert_lapse_ok(put(rs_client(), "rf1", id, "before", &e), &e);
    }

    etcd_members *em = cluster_etcd(rs_cluster());
    assert_int_equal(etcd_members_kill(em, 0, SIGSTOP), 0);
    clock_mono stopped = clock_mono_now();
    lapse_client *quick = client_with_timeout(300);
    /* The primaries stop within the lease (2 s); bounded at 10 s. */
    int64_t refused_ms = -1;
    int unanswered = 0; /* a slow machine's: neither acknowledged nor refused */
    while (clock_mono_now().ms - stopped.ms < 10000) {
        int rv = put(quick, "rf3", "k0", "during", &e);
        if (rv == LAPSE_ETIMEDOUT) {
            unanswered++;
        } else if (rv != 0) {
            refused_ms = clock_mono_now().ms - stopped.ms;
            break;
        }
    }
    if (refused_ms < 0 || strstr(e.message, "etcd lease") == NULL) {
        etcd_members_kill(em, 0, SIGCONT);
        fail_msg("10 s after etcd stalled, a write is %s",
                 refused_ms < 0 ? "still acknowledged" : e.message);
    }
    print_message("lease_fence_test: rf3 writes refused %lld ms after etcd stalled (%d writes "
                  "had no answer within 300 ms before)\n",
                  (long long)refused_ms, unanswered);
    /* Every primary (20 keys over 4 partitions), for writes and strong
     * reads; one copy goes on. */
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof(id), "k%d", i);
        int rv = put_answered(quick, "rf3", id, "during", &e);
        if (rv != LAPSE_EWRONGNODE || strstr(e.message, "etcd lease") == NULL) {
            etcd_members_kill(em, 0, SIGCONT);
            fail_msg("a write of %s with etcd stalled: %s", id,
                     rv == 0 ? "acknowledged" : e.message);
        }
    }
    for (int i = 0; i < 20; i++) {
        char *v = NULL;
        snprintf(id, sizeof(id), "k%d", i);
        int rv = get_answered(quick, "rf3", id, &v, &e);
        if (rv == 0) {
            etcd_members_kill(em, 0, SIGCONT);
            fail_msg("a read of %s was served with etcd stalled (V=%s)", id, v);
        }
        assert_int_equal(rv, LAPSE_EWRONGNODE);
        assert_non_null(strstr(e.message, "etcd lease"));
        assert_lapse_ok(put_answered(quick, "rf1", id, "during", &e), &e);
        assert_lapse_ok(get_answered(quick, "rf1", id, &v, &e), &e);
        assert_string_equal(v, "during");
        free(v);
    }
    /* Nobody could change the map meanwhile (it lives in etcd): the
     * refusals were the fence's, with every node still primary in it. */
    lapse_close(quick);

    assert_int_equal(etcd_members_kill(em, 0, SIGCONT), 0);
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof(id), "k%d", i);
        rs_put_retrying("rf3", id, "after");
    }
    pmap_free(rs_wait_all_in_sync("rf3"));
    assert_int_equal(rs_assert_copies_match("rf3"), 20);
    for (int i = 0; i < 20; i++) {
        char *v = NULL;
        snprintf(id, sizeof(id), "k%d", i);
        assert_lapse_ok(get(rs_client(), "rf3", id, &v, &e), &e);
        assert_string_equal(v, "after");
        free(v);
    }
}

typedef struct stale_read {
    lapse_client *cl;
    int rv;
    char *v;
    lapse_error e;
} stale_read;

static void *stale_read_main(void *arg)
{
    stale_read *r = arg;
    r->rv = get(r->cl, "solo", "x", &r->v, &r->e);
    return NULL;
}

static void test_deposed_primary_serves_no_stale_read(void **state)
{
    (void)state;
    etcd_members_kill(cluster_etcd(rs_cluster()), 0, SIGCONT); /* after a failed test above */
    create("solo", 1, 3);
    lapse_error e = {0};
    rs_put_retrying("solo", "x", "old");
    pmap *pm = rs_wait_all_in_sync("solo");
    uint32_t old = pmap_part(pmap_table_find(pm, "solo"), 0)->ids[0];
    uint64_t epoch = pmap_part(pmap_table_find(pm, "solo"), 0)->epoch;
    pmap_free(pm);
    /* A client that has read through the old primary: its map names it. */
    lapse_client *stale = client_with_timeout(8000);
    char *v = NULL;
    assert_lapse_ok(get(stale, "solo", "x", &v, &e), &e);
    assert_string_equal(v, "old");
    free(v);

    assert_int_equal(cluster_kill(rs_cluster(), (int)old, SIGSTOP), 0);
    rs_wait_state(old, "DOWN");
    pm = testmap_fetch(rs_cluster());
    const pmap_replicas *r = pmap_part(pmap_table_find(pm, "solo"), 0);
    assert_int_not_equal(r->ids[0], old);
    assert_int_equal(r->epoch, epoch + 1);
    pmap_free(pm);
    rs_put_retrying("solo", "x", "new"); /* acknowledged by the new primary */

    /* The stale client's read goes to the stalled old primary and waits
     * in its socket; the node resumes with that read and the map push
     * queued side by side. */
    stale_read sr = {.cl = stale};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stale_read_main, &sr), 0);
    rs_sleep_ms(300);
    assert_int_equal(cluster_kill(rs_cluster(), (int)old, SIGCONT), 0);
    pthread_join(th, NULL);
    if (sr.rv != 0) {
        fail_msg("the read after the stall failed: %s", sr.e.message);
    }
    if (strcmp(sr.v, "new") != 0) {
        fail_msg("a deposed primary served a stale read: V=%s, acknowledged since: new", sr.v);
    }
    free(sr.v);
    lapse_close(stale);

    /* The old primary, back under a new lease, rejoins as a replica. */
    rs_wait_state(old, "UP");
    pmap_free(rs_wait_all_in_sync("solo"));
    rs_assert_copies_match("solo");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_primary_acts_while_etcd_is_stalled),
        cmocka_unit_test(test_deposed_primary_serves_no_stale_read),
    };
    return cmocka_run_group_tests(tests, rs_group_setup, rs_group_teardown);
}
