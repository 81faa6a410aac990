/*
 * async_test: a coordinator and three real nodes on loopback, liblapse's
 * asynchronous calls: puts, gets and deletes all in flight from one thread,
 * a client on a lapse_loop (callbacks on the loop's thread, the program's
 * own descriptor served there), and calls routed by a stale partition map
 * (an asynchronous one makes one attempt, a blocking one refreshes on
 * WRONG_NODE and lands).
 */
#define TESTUTIL_THREE_NODE_GROUP /* g_cluster, g_client, group_setup, group_teardown */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../common/item.h"
#include "../placement/hash.h"
#include "../placement/pmap.h"
#include "testmap.h"

/* ---- asynchronous get, put and delete (lapse_*_async) ---- */

/* What the done callbacks of a group of asynchronous calls saw. */
typedef struct async_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int left;  /* calls not done yet */
    int calls; /* done calls, over all: each exactly once */
    int status[512];
    lapse_item *got[512]; /* a get's item */
} async_group;

typedef struct async_slot {
    async_group *g;
    int i;
} async_slot;

static void async_finish(async_slot *s, int status, lapse_item *it)
{
    async_group *g = s->g;
    pthread_mutex_lock(&g->mu);
    g->status[s->i] = status;
    g->got[s->i] = it;
    g->calls++;
    g->left--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void async_get_cb(void *arg, int status, lapse_item *it, const lapse_error *err)
{
    assert_non_null(err);
    async_finish(arg, status, it);
}

static void async_put_cb(void *arg, int status, const lapse_error *err)
{
    assert_non_null(err);
    async_finish(arg, status, NULL);
}

/* Waits (at most 10 s) for every call of g to be done. */
static void async_wait(async_group *g)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g->mu);
    while (g->left > 0 && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0) {
    }
    int left = g->left;
    pthread_mutex_unlock(&g->mu);
    assert_int_equal(left, 0);
}

static void async_group_init(async_group *g, int n)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->left = n;
    for (int i = 0; i < n; i++) {
        g->status[i] = -1;
    }
}

/* Puts {Id: PREFIX<i>, V: i} for i < n into table over c, all in flight at
 * once from this thread, each ending in done; waits for them all and
 * checks each succeeded. */
static void put_all_async(lapse_client *c, const char *table, char prefix, int n, lapse_done done,
                          async_group *g, async_slot *slots)
{
    lapse_error e = {0};
    async_group_init(g, n);
    for (int i = 0; i < n; i++) {
        slots[i] = (async_slot){g, i};
        lapse_item *it = item_json("{\"Id\":{\"S\":\"%c%d\"},\"V\":{\"N\":\"%d\"}}", prefix, i, i);
        assert_lapse_ok(lapse_put_async(c, table, it, done, &slots[i], &e), &e);
        lapse_item_free(it);
    }
    async_wait(g);
    assert_int_equal(g->calls, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(g->status[i], 0);
    }
}

/* The first n gets of g found their item with V = i; frees them. */
static void check_got_values(async_group *g, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(g->status[i], 0);
        assert_non_null(g->got[i]);
        char want[32];
        snprintf(want, sizeof want, "%d", i);
        assert_string_equal(lapse_item_get_n(g->got[i], "V"), want);
        lapse_item_free(g->got[i]);
    }
}

static void test_async_get_and_put(void **state)
{
    (void)state;
    enum { N = 300 };
    lapse_error e = {0};
    create_keyed_table(g_client, "Async", "Id", 'S', NULL, 0, 16);
    static async_group g;
    static async_slot slots[N + 1];

    /* Puts from one thread, all in flight at once. */
    put_all_async(g_client, "Async", 'a', N, async_put_cb, &g, slots);

    /* Gets of every key and of one that is absent; blocking reads agree. */
    async_group_init(&g, N + 1);
    for (int i = 0; i <= N; i++) {
        slots[i] = (async_slot){&g, i};
        lapse_item *key = item_json("{\"Id\":{\"S\":\"a%d\"}}", i);
        lapse_read_opts ro = {.eventually_consistent = i % 2};
        assert_lapse_ok(lapse_get_async(g_client, "Async", key, &ro, async_get_cb, &slots[i], &e),
                        &e);
        lapse_item_free(key);
    }
    async_wait(&g);
    assert_int_equal(g.calls, N + 1);
    check_got_values(&g, N);
    assert_int_equal(g.status[N], 0);
    assert_null(g.got[N]);

    /* Deletes of every other key (and of the absent one: nothing to do);
     * blocking reads see exactly those gone. */
    async_group_init(&g, N / 2 + 1);
    for (int i = 0; i <= N / 2; i++) {
        slots[i] = (async_slot){&g, i};
        lapse_item *k = item_json("{\"Id\":{\"S\":\"a%d\"}}", i < N / 2 ? 2 * i : N);
        assert_lapse_ok(lapse_delete_async(g_client, "Async", k, async_put_cb, &slots[i], &e), &e);
        lapse_item_free(k);
    }
    async_wait(&g);
    for (int i = 0; i <= N / 2; i++) {
        assert_int_equal(g.status[i], 0);
    }
    for (int i = 0; i < N; i++) {
        lapse_item *k = item_json("{\"Id\":{\"S\":\"a%d\"}}", i), *got = NULL;
        assert_lapse_ok(lapse_get(g_client, "Async", k, &got, &e), &e);
        if ((got == NULL) != (i % 2 == 0)) {
            fail_msg("key a%d is %s after the deletes", i, got ? "there" : "gone");
        }
        lapse_item_free(got);
        lapse_item_free(k);
    }

    /* What cannot be sent is refused at once, and done is never called. */
    lapse_item *key = item_json("{\"Id\":{\"S\":\"a1\"}}");
    lapse_item *badkey = item_json("{\"Id\":{\"N\":\"1\"}}");
    async_group_init(&g, 0);
    slots[0] = (async_slot){&g, 0};
    assert_int_equal(
        lapse_get_async(g_client, "NoSuchTable", key, NULL, async_get_cb, &slots[0], &e),
        LAPSE_ENOTFOUND);
    assert_int_equal(lapse_get_async(g_client, "Async", badkey, NULL, async_get_cb, &slots[0], &e),
                     LAPSE_EINVAL);
    assert_int_equal(lapse_put_async(g_client, "Async", badkey, async_put_cb, &slots[0], &e),
                     LAPSE_EINVAL);
    assert_int_equal(lapse_get_async(g_client, "Async", key, NULL, NULL, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(g.calls, 0);

    /* A table the client's map does not hold yet: the asynchronous call
     * does not fetch the map (that blocks), the blocking one does. */
    lapse_client *older = connect_client(g_cluster);
    create_keyed_table(g_client, "AsyncLater", "Id", 'S', NULL, 0, 4);
    assert_int_equal(lapse_get_async(older, "AsyncLater", key, NULL, async_get_cb, &slots[0], &e),
                     LAPSE_ENOTFOUND);
    assert_int_equal(g.calls, 0);
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(older, "AsyncLater", key, &got, &e), &e);
    assert_null(got);
    async_group_init(&g, 1);
    assert_lapse_ok(lapse_get_async(older, "AsyncLater", key, NULL, async_get_cb, &slots[0], &e),
                    &e);
    async_wait(&g);
    assert_int_equal(g.status[0], 0);
    assert_null(g.got[0]);
    lapse_close(older);
    lapse_item_free(key);
    lapse_item_free(badkey);
}

/* A key of table "Moving" whose partition has another primary in after than
 * in before (-1: none among k0..k63). */
static int moved_key(const pmap *before, const pmap *after)
{
    const pmap_table *tb = pmap_table_find(before, "Moving"),
                     *ta = pmap_table_find(after, "Moving");
    for (int i = 0; i < 64; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        attr_value v;
        uint32_t pb, pa;
        assert_int_equal(item_value_init_bytes(&v, ATTR_S, k, strlen(k)), 0);
        assert_int_equal(hash_partition(&v, tb->schema.partitions, &pb), 0);
        assert_int_equal(hash_partition(&v, ta->schema.partitions, &pa), 0);
        item_value_fini(&v);
        if (pmap_owner(tb, pb) != pmap_owner(ta, pa)) {
            return i;
        }
    }
    return -1;
}

/* An asynchronous call on a stale map makes one attempt: the old owner's
 * WRONG_NODE comes back as a retryable status, further asynchronous calls
 * are refused until a blocking call has fetched the map, and then they go. */
static void async_call_on_stale_map(lapse_client *stale, int k)
{
    static async_group g;
    async_slot slot = {&g, 0};
    lapse_error e = {0};
    lapse_item *key = item_json("{\"K\":{\"S\":\"k%d\"}}", k);
    async_group_init(&g, 1);
    assert_lapse_ok(lapse_get_async(stale, "Moving", key, NULL, async_get_cb, &slot, &e), &e);
    async_wait(&g);
    assert_int_equal(g.status[0], LAPSE_EWRONGNODE);
    assert_true(lapse_retryable(g.status[0]));
    assert_int_equal(lapse_get_async(stale, "Moving", key, NULL, async_get_cb, &slot, &e),
                     LAPSE_EWRONGNODE);
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(stale, "Moving", key, &got, &e), &e);
    lapse_item_free(got);
    async_group_init(&g, 1);
    assert_lapse_ok(lapse_get_async(stale, "Moving", key, NULL, async_get_cb, &slot, &e), &e);
    async_wait(&g);
    assert_int_equal(g.status[0], 0);
    lapse_item_free(g.got[0]);
    lapse_item_free(key);
}

/* A loop's own descriptor: each time it is readable, counted (on the
 * loop's thread or not) and drained. */
typedef struct own_fd {
    lapse_loop *l;
    int fd;
    atomic_int calls, off_loop;
} own_fd;

static void own_fd_ready(void *arg)
{
    own_fd *o = arg;
    uint64_t n;
    if (read(o->fd, &n, sizeof n) < 0) {
        return; /* drained already */
    }
    atomic_fetch_add(&o->off_loop, !lapse_loop_on_thread(o->l));
    atomic_fetch_add(&o->calls, 1);
}

/* Where the asynchronous calls' callbacks ran. */
static atomic_int g_loop_cb_off;
static lapse_loop *g_cb_loop;

static void loop_put_cb(void *arg, int status, const lapse_error *err)
{
    atomic_fetch_add(&g_loop_cb_off, !lapse_loop_on_thread(g_cb_loop));
    async_put_cb(arg, status, err);
}

static void loop_get_cb(void *arg, int status, lapse_item *it, const lapse_error *err)
{
    atomic_fetch_add(&g_loop_cb_off, !lapse_loop_on_thread(g_cb_loop));
    async_get_cb(arg, status, it, err);
}

/* A client on a lapse_loop (as the DynamoDB gateway's): asynchronous
 * calls' callbacks run on the loop's thread, blocking calls from another
 * thread still work, and the program's own descriptor is served on the
 * same thread until unwatched; bad arguments are EINVAL. */
static void test_client_on_a_loop(void **state)
{
    (void)state;
    enum { N = 200 };
    lapse_error e = {0};
    lapse_loop *l = NULL;
    assert_lapse_ok(lapse_loop_open(&l, &e), &e);
    assert_false(lapse_loop_on_thread(l));
    create_keyed_table(g_client, "OnLoop", "Id", 'S', NULL, 0,
                       8); /* before: the client's first map has it */
    lapse_connect_options co = {.loop = l};
    lapse_client *c = NULL;
    assert_lapse_ok(lapse_connect_opts(&c, cluster_coordinator_url(g_cluster), &co, &e), &e);
    g_cb_loop = l;
    atomic_store(&g_loop_cb_off, 0);
    static async_group g;
    static async_slot slots[N];
    put_all_async(c, "OnLoop", 'l', N, loop_put_cb, &g, slots);
    /* A blocking call from this thread, its reply read on the loop. */
    lapse_item *k0 = item_json("{\"Id\":{\"S\":\"l0\"}}"), *got0 = NULL;
    assert_lapse_ok(lapse_get(c, "OnLoop", k0, &got0, &e), &e);
    assert_non_null(got0);
    lapse_item_free(got0);
    lapse_item_free(k0);
    async_group_init(&g, N);
    for (int i = 0; i < N; i++) {
        slots[i] = (async_slot){&g, i};
        lapse_item *k = item_json("{\"Id\":{\"S\":\"l%d\"}}", i);
        assert_lapse_ok(lapse_get_async(c, "OnLoop", k, NULL, loop_get_cb, &slots[i], &e), &e);
        lapse_item_free(k);
    }
    async_wait(&g);
    check_got_values(&g, N);
    assert_int_equal(atomic_load(&g_loop_cb_off), 0);

    own_fd o = {.l = l, .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    assert_true(o.fd >= 0);
    assert_lapse_ok(lapse_loop_watch(l, o.fd, own_fd_ready, &o, &e), &e);
    for (int i = 1; i <= 5; i++) {
        uint64_t one = 1;
        assert_int_equal(write(o.fd, &one, sizeof one), (ssize_t)sizeof one);
        for (int t = 0; atomic_load(&o.calls) < i; t++) {
            assert_true(t < 5000);
            usleep(1000);
        }
    }
    lapse_loop_unwatch(l, o.fd);
    uint64_t one = 1;
    assert_int_equal(write(o.fd, &one, sizeof one), (ssize_t)sizeof one);
    usleep(50000);
    assert_int_equal(atomic_load(&o.calls), 5);
    assert_int_equal(atomic_load(&o.off_loop), 0);
    close(o.fd);

    assert_int_equal(lapse_loop_watch(NULL, 0, own_fd_ready, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(lapse_loop_watch(l, -1, own_fd_ready, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(lapse_loop_watch(l, 0, NULL, NULL, &e), LAPSE_EINVAL);
    assert_int_equal(lapse_loop_open(NULL, &e), LAPSE_EINVAL);
    lapse_close(c);
    lapse_loop_close(l);
    lapse_loop_close(NULL);
}

static void test_stale_map_is_refreshed_on_wrong_node(void **state)
{
    (void)state;
    lapse_error e = {0};
    create_keyed_table(g_client, "Moving", "K", 'S', NULL, 0, 8);
    lapse_client *stale = connect_client(g_cluster); /* caches the map now */
    lapse_client *stale_async = connect_client(g_cluster);
    lapse_item *it = item_json("{\"K\":{\"S\":\"k0\"}}");
    assert_lapse_ok(lapse_put(stale, "Moving", it, NULL, &e), &e);

    /* Recreate the table with every partition on a different node: delete it,
     * create a one-partition table (taking the least loaded node), then the
     * same name again, which the balanced assignment now lays out shifted. */
    pmap *before = testmap_fetch(g_cluster);
    assert_lapse_ok(lapse_delete_table(g_client, "Moving", &e), &e);
    create_keyed_table(g_client, "Shim", "K", 'S', NULL, 0, 1);
    create_keyed_table(g_client, "Moving", "K", 'S', NULL, 0, 8);
    pmap *after = testmap_fetch(g_cluster);
    int moved = 0;
    for (uint32_t p = 0; p < 8; p++) {
        moved += pmap_owner(pmap_table_find(before, "Moving"), p) !=
                 pmap_owner(pmap_table_find(after, "Moving"), p);
    }
    assert_true(moved > 0);
    int k = moved_key(before, after);
    assert_true(k >= 0);
    async_call_on_stale_map(stale_async, k);
    lapse_close(stale_async);

    /* The stale client routes by its old map, is told WRONG_NODE, refreshes
     * and lands every write; the data of the old table is gone. */
    lapse_item *key = item_json("{\"K\":{\"S\":\"k0\"}}");
    lapse_item *got = NULL;
    assert_lapse_ok(lapse_get(stale, "Moving", key, &got, &e), &e);
    assert_null(got);
    for (int i = 0; i < 64; i++) {
        lapse_item *x = item_json("{\"K\":{\"S\":\"k%d\"}}", i);
        assert_lapse_ok(lapse_put(stale, "Moving", x, NULL, &e), &e);
        lapse_item_free(x);
    }
    int seen = 0;
    lapse_scan_opts o = {0};
    lapse_page *pg = NULL;
    assert_lapse_ok(lapse_scan(g_client, "Moving", &o, &pg, &e), &e);
    seen = (int)lapse_page_count(pg);
    lapse_page_free(pg);
    assert_int_equal(seen, 64);

    pmap_free(before);
    pmap_free(after);
    lapse_item_free(key);
    lapse_item_free(it);
    lapse_close(stale);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_get_and_put),
        cmocka_unit_test(test_client_on_a_loop),
        cmocka_unit_test(test_stale_map_is_refreshed_on_wrong_node),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
