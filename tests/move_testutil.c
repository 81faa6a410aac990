/* move_testutil.c: helpers of the tests of moving copies; see move_testutil.h. */
#include "move_testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../common/clock.h"
#include "replset_testutil.h"
#include "streamread.h"
#include "testmap.h"
#include "testutil.h"

static void *write_loop(void *arg)
{
    mv_writer *w = arg;
    lapse_client *c = NULL;
    lapse_error e = {0};
    if (lapse_connect(&c, cluster_coordinator_url(rs_cluster()), &e) != 0) {
        return NULL;
    }
    while (!atomic_load(&w->stop) && w->n < MV_WRITER_MAX) {
        int i = w->n++;
        lapse_item *it = item_json("{\"Id\":{\"S\":\"w%d\"},\"V\":{\"N\":\"%d\"}}", i, i);
        int rv = lapse_put(c, w->table, it, NULL, &e);
        lapse_item_free(it);
        w->acked[i] = rv == 0;
        *(rv == 0 ? &w->nacked : &w->nfailed) += 1;
    }
    lapse_close(c);
    return NULL;
}

void mv_writer_start(mv_writer *w, const char *table)
{
    memset(w, 0, sizeof(*w));
    w->table = table;
    assert_int_equal(pthread_create(&w->thread, NULL, write_loop, w), 0);
}

void mv_writer_stop(mv_writer *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
}

int mv_writer_check(const mv_writer *w, const char *table)
{
    lapse_error e = {0};
    int present = 0;
    for (int i = 0; i < w->n; i++) {
        lapse_item *k = item_json("{\"Id\":{\"S\":\"w%d\"}}", i), *got = NULL;
        assert_lapse_ok(lapse_get(rs_client(), table, k, &got, &e), &e);
        if (w->acked[i] && got == NULL) {
            fail_msg("acknowledged write w%d lost in the moves", i);
        }
        present += got != NULL;
        lapse_item_free(got);
        lapse_item_free(k);
    }
    return present;
}

json_t *mv_drain(uint32_t node, int stop, int want_rv)
{
    clock_mono deadline = clock_mono_after_ms(20000);
    for (;;) {
        char *js = NULL;
        lapse_error e = {0};
        int rv = lapse_node_drain(rs_client(), node, stop, &js, &e);
        /* retried while the coordinators answer "taking over" (a leader
         * whose etcd lease lapsed on a busy machine) */
        if (rv != LAPSE_EUNAVAILABLE || want_rv == LAPSE_EUNAVAILABLE ||
            clock_mono_remaining_ms(deadline) == 0) {
            return rs_json_answer("node drain", rv, want_rv, js, &e);
        }
        lapse_free(js);
        rs_sleep_ms(200);
    }
}

json_t *mv_remove(uint32_t node, int want_rv)
{
    char *js = NULL;
    lapse_error e = {0};
    int rv = lapse_node_remove(rs_client(), node, 0, &js, &e);
    return rs_json_answer("node remove", rv, want_rv, js, &e);
}

json_t *mv_remove_lose_data(uint32_t node)
{
    char *js = NULL;
    lapse_error e = {0};
    int rv = lapse_node_remove(rs_client(), node, LAPSE_REMOVE_LOSE_DATA, &js, &e);
    return rs_json_answer("node remove --lose-data", rv, 0, js, &e);
}

size_t mv_wait_only_members_hold(const char *table, int nodes)
{
    pmap *pm = testmap_fetch(rs_cluster());
    const pmap_table *t = pmap_table_find(pm, table);
    assert_non_null(t);
    size_t held_at_start = 0;
    clock_mono deadline = clock_mono_after_ms(30000);
    for (uint32_t p = 0; p < t->schema.partitions; p++) {
        for (int node = 1; node <= nodes; node++) {
            if (pmap_replicas_index(pmap_part(t, p), (uint32_t)node) >= 0) {
                continue;
            }
            rs_digest d = rs_node_digest(node, t->schema.id, p);
            held_at_start += d.items > 0;
            while (d.items > 0 || d.seq > 0) {
                if (clock_mono_remaining_ms(deadline) == 0) {
                    fail_msg("node %d still holds %llu items (record %llu) of %s partition %u "
                             "after 30 s out of its set",
                             node, (unsigned long long)d.items, (unsigned long long)d.seq, table,
                             (unsigned)p);
                }
                rs_sleep_ms(200);
                d = rs_node_digest(node, t->schema.id, p);
            }
        }
    }
    pmap_free(pm);
    return held_at_start;
}

size_t mv_moves_now(uint32_t from)
{
    char *js = NULL;
    lapse_error e = {0};
    int rv = lapse_cluster_status(rs_client(), &js, &e);
    json_t *doc = rs_json_answer("cluster-status", rv, 0, js, &e), *mv;
    json_t *moves = json_object_get(doc, "Moves");
    assert_true(json_is_array(moves));
    size_t i, n = json_array_size(moves);
    json_array_foreach(moves, i, mv)
    {
        json_t *f = json_object_get(mv, "From");
        const char *step = json_string_value(json_object_get(mv, "Step"));
        assert_non_null(step);
        if (json_object_get(mv, "Kind") != NULL) { /* a GSI or stream copy's */
            assert_true(strcmp(step, "filling") == 0 || strcmp(step, "adding") == 0);
            assert_true(json_array_size(f) <= 1);
            assert_true(json_array_size(json_object_get(mv, "To")) <= 1);
            continue;
        }
        assert_true(strcmp(step, "copying") == 0 || strcmp(step, "adding") == 0 ||
                    strcmp(step, "handing-over") == 0 || strcmp(step, "removing") == 0);
        assert_int_equal(json_array_size(f), 1);
        if (from != 0) {
            assert_int_equal(json_integer_value(json_array_get(f, 0)), (json_int_t)from);
        }
        json_t *to;
        size_t k;
        json_array_foreach(json_object_get(mv, "To"), k, to)
        {
            assert_int_not_equal(json_integer_value(to), json_integer_value(json_array_get(f, 0)));
        }
    }
    json_decref(doc);
    return n;
}

json_int_t mv_left_on(uint32_t node)
{
    json_t *d = mv_drain(node, 0, 0);
    json_int_t left = rs_json_int(d, "BaseCopiesLeft") + rs_json_int(d, "DerivedCopiesLeft");
    json_decref(d);
    return left;
}

void mv_create_ttl_table(const char *table, unsigned copies)
{
    lapse_error e = {0};
    lapse_table_def d = {.name = table,
                         .partition_key = "Id",
                         .partition_key_type = 'S',
                         .partitions = MV_PARTS,
                         .replication = copies,
                         .stream = 1};
    assert_lapse_ok(lapse_create_table(rs_client(), &d, &e), &e);
    lapse_ttl_spec spec = {.action = LAPSE_TTL_ENABLE, .attribute = "Exp"};
    assert_lapse_ok(lapse_update_ttl(rs_client(), table, &spec, NULL, &e), &e);
    /* Due 8 to 15 s from now: while the drain below goes on. */
    long long now = (long long)time(NULL);
    for (int i = 0; i < MV_KEYS; i++) {
        lapse_item *it = i % 2 == 0 ? item_json("{\"Id\":{\"S\":\"k%d\"},\"Exp\":{\"N\":\"%lld\"}}",
                                                i, now + 8 + i % 8)
                                    : item_json("{\"Id\":{\"S\":\"k%d\"}}", i);
        assert_lapse_ok(lapse_put(rs_client(), table, it, NULL, &e), &e);
        lapse_item_free(it);
    }
}

void mv_print_stall(uint32_t node)
{
    char *js = NULL;
    lapse_error e = {0};
    if (lapse_node_drain(rs_client(), node, 0, &js, &e) == 0) {
        fprintf(stderr, "node drain %u answers: %s\n", (unsigned)node, js);
        lapse_free(js);
    }
    json_t *plan = rs_rebalance_plan();
    char *ps = json_dumps(plan, JSON_COMPACT);
    fprintf(stderr, "the rebalance plan: %s\n", ps != NULL ? ps : "?");
    free(ps);
    json_decref(plan);
    cluster *c = rs_cluster();
    for (int k = 0; k < cluster_coordinators(c); k++) {
        cluster_print_log_tail(c, cluster_coordinator_index(c, k), 60);
    }
    cluster_print_log_tail(c, (int)node, 30);
}

json_int_t mv_wait_left_at_most(uint32_t node, json_int_t most, long timeout_ms, const char *what)
{
    clock_mono deadline = clock_mono_after_ms(timeout_ms);
    json_int_t left;
    while ((left = mv_left_on(node)) > most) {
        if (clock_mono_remaining_ms(deadline) == 0) {
            mv_print_stall(node);
            fail_msg("%s: node %u still holds %lld copies after %ld ms", what, (unsigned)node,
                     (long long)left, timeout_ms);
        }
        rs_sleep_ms(200);
    }
    return left;
}

void mv_check_ttl_stream(const char *table)
{
    lapse_error e = {0};
    streamread sr = {0};
    int per_key[MV_KEYS];
    clock_mono deadline = clock_mono_after_ms(20000);
    for (;;) {
        assert_lapse_ok(streamread_more(rs_client(), table, &sr, &e), &e);
        memset(per_key, 0, sizeof(per_key));
        int due_seen = 0;
        for (size_t i = 0; i < sr.n; i++) {
            const lapse_stream_record *r = sr.r[i];
            const char *id = lapse_item_get_s(r->keys, "Id");
            if (r->event != LAPSE_STREAM_REMOVE || id == NULL || id[0] != 'k') {
                continue;
            }
            int k = atoi(id + 1);
            assert_true(k >= 0 && k < MV_KEYS);
            if (!r->ttl_delete) {
                fail_msg("item %s removed by something other than TTL", id);
            }
            if (k % 2 != 0) {
                fail_msg("item %s, never due, has a TTL delete in the stream", id);
            }
            due_seen += per_key[k]++ == 0;
        }
        for (int k = 0; k < MV_KEYS; k += 2) {
            if (per_key[k] > 1) {
                fail_msg("due item k%d has %d TTL deletes in the stream", k, per_key[k]);
            }
        }
        if (due_seen == MV_KEYS / 2) {
            break;
        }
        if (clock_mono_remaining_ms(deadline) == 0) {
            fail_msg("the stream holds TTL deletes of %d of the %d due items after 20 s", due_seen,
                     MV_KEYS / 2);
        }
        rs_sleep_ms(500);
    }
    char why[256];
    if (streamread_gap(&sr, 1, why, sizeof(why)) != 0) {
        fail_msg("stream gap: %s", why);
    }
    streamread_free(&sr);
}

void mv_check_drained(const char *table, unsigned copies, uint32_t node, const mv_writer *w,
                      int nodes)
{
    lapse_error e = {0};
    pmap *pm = rs_wait_all_in_sync(table);
    const pmap_table *t = pmap_table_find(pm, table);
    for (uint32_t p = 0; p < MV_PARTS; p++) {
        assert_int_equal(pmap_part(t, p)->n, copies);
        assert_int_equal(pmap_replicas_index(pmap_part(t, p), node), -1);
        assert_int_equal(pmap_stream_shard(t, p)->n, copies);
        assert_int_equal(pmap_replicas_index(pmap_stream_shard(t, p), node), -1);
        assert_int_equal(pmap_stream_shard(t, p)->joining, 0);
    }
    pmap_free(pm);
    int present = mv_writer_check(w, table);

    /* Every due item goes (once: the stream below), every other stays. */
    clock_mono deadline = clock_mono_after_ms(30000);
    for (int i = 0; i < MV_KEYS; i++) {
        lapse_item *k = item_json("{\"Id\":{\"S\":\"k%d\"}}", i), *got = NULL;
        assert_lapse_ok(lapse_get(rs_client(), table, k, &got, &e), &e);
        while (i % 2 == 0 && got != NULL) {
            if (clock_mono_remaining_ms(deadline) == 0) {
                fail_msg("due item k%d of %s still there", i, table);
            }
            lapse_item_free(got);
            got = NULL;
            rs_sleep_ms(200);
            assert_lapse_ok(lapse_get(rs_client(), table, k, &got, &e), &e);
        }
        if (i % 2 != 0 && got == NULL) {
            fail_msg("item k%d of %s, never due, lost in the moves", i, table);
        }
        lapse_item_free(got);
        lapse_item_free(k);
    }
    assert_int_equal(rs_wait_copies_match(table, 20000), (uint64_t)(MV_KEYS / 2 + present));
    mv_check_ttl_stream(table);
    mv_wait_only_members_hold(table, nodes);
}
