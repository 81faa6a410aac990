/*
 * repl_testutil.h: the fixture and helpers of replication_test and
 * gsi_expiry_test (indexes and the change stream on a real cluster): the
 * cluster and its client, item lists, paged index queries and scans,
 * bounded waits, a model of a table that predicts the stream records its
 * writes must produce, reading a whole stream, and running the CLI.
 *
 * Every helper fails the running cmocka test (with what was expected and
 * what was found) instead of returning an error. Tables used with the model
 * have an S partition key and an N sort key.
 *
 * Thread-safety: none; one test thread.
 */
#ifndef LAPSE_REPL_TESTUTIL_H
#define LAPSE_REPL_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../client/lapse.h"
#include "cluster.h"
#include "scrape.h"
#include "streamread.h"

/* ---- the fixture ---- */

/* cmocka group setup and teardown: rt_setup starts a three-node cluster
 * (metrics on) and connects a client that every helper uses; rt_teardown
 * closes both and fails (-1) when a daemon exited on its own, keeping the
 * logs (the run dir is printed). */
int rt_setup(void **state);
int rt_teardown(void **state);
/* The fixture's cluster and client (borrowed until rt_teardown). */
cluster *rt_cluster(void);
lapse_client *rt_client(void);
/* Creates table d (fails the test on error). */
void rt_create(const lapse_table_def *d);

int64_t rt_wall_ms(void);
void rt_sleep_ms(int ms);

/* ---- item lists ---- */

typedef struct rt_items {
    lapse_item **v; /* owned items */
    size_t n, cap;
} rt_items;

void rt_items_push(rt_items *l, lapse_item *it); /* takes it */
void rt_items_free(rt_items *l);
/* Sorts by attributes a, then b, then c (NULL: none): S by bytes, N by
 * value, an absent attribute first. */
void rt_sort(rt_items *l, const char *a, const char *b, const char *c);
/* 1 when both hold equal items in the same order. */
int rt_items_equal(const rt_items *a, const rt_items *b);
void rt_assert_items_equal(const rt_items *got, const rt_items *want, const char *what);

/* ---- reads ---- */

/* Every item of a query of table's index (NULL: the table) with partition
 * key value pk_json and the sort key condition of cond (may be NULL), in
 * pages of page_limit (0: unlimited), appended to out. */
void rt_query_all(const char *table, const char *index, const char *pk_json,
                  const lapse_query_opts *cond, int hide_expired, unsigned page_limit,
                  rt_items *out);
/* Every item of table, appended to out. */
void rt_scan_all(const char *table, rt_items *out);
/* Whether table holds the item with key_json. */
int rt_exists(const char *table, const char *key_json);

/* Calls cond(arg, 0) every 100 ms until it returns non-zero; after
 * timeout_ms calls cond(arg, 1) once more (it may fail with details) and
 * fails naming what was awaited. */
void rt_wait_for(const char *what, int timeout_ms, int (*cond)(void *arg, int last), void *arg);

/* Enables TTL on attr and waits (bounded) for ENABLED. */
void rt_enable_ttl(const char *table, const char *attr);
/* Pauses TTL deletion. */
void rt_pause_ttl(const char *table);
/* Waits (bounded) until every node runs the coordinator's map version. */
void rt_wait_nodes_took_map(void);

/* ---- the stream ---- */

/* A whole stream as read (streamread.h, shared with the chaos checker). */
typedef streamread rt_stream;

/* Reads until the stream holds want records (fails at once with more, or
 * after timeout_ms with fewer). */
void rt_stream_wait(rt_stream *s, const char *table, size_t want, int timeout_ms);
/* Each shard's sequence numbers are consecutive, from 1 when from_one. */
void rt_stream_check_gapless(const rt_stream *s, int from_one);
void rt_stream_free(rt_stream *s);

/* ---- a model of a table and its stream ---- */

typedef struct rt_model rt_model;

/* A model of table (partition key pk of type S, sort key sk of type N,
 * partitions base partitions). */
rt_model *rt_model_new(const char *table, const char *pk, const char *sk, uint32_t partitions);
void rt_model_free(rt_model *m);
/* Writes through the client and records what the stream must show. */
void rt_put(rt_model *m, const char *item_json);
void rt_delete(rt_model *m, const char *pk, int sk);
/* SET name1 = v1 (and name2 = v2 unless NULL) on the item. */
void rt_update(rt_model *m, const char *pk, int sk, const char *name1, const char *v1,
               const char *name2, const char *v2);
/* A batch write: puts and deletes gathered, sent by rt_batch_commit. */
void rt_batch_put(rt_model *m, const char *item_json);
void rt_batch_delete(rt_model *m, const char *pk, int sk);
void rt_batch_commit(rt_model *m);
/* The item TTL deleted: a REMOVE with principal lapse.ttl, attribute attr
 * and due instant expires_at_ms. */
void rt_model_ttl_removed(rt_model *m, const char *pk, int sk, const char *attr,
                          int64_t expires_at_ms);
/* The current item (borrowed), or NULL. */
const lapse_item *rt_model_get(const rt_model *m, const char *pk, int sk);
/* Copies of the current items whose S attribute attr equals value (attr
 * NULL: all), appended to out. */
void rt_model_select(const rt_model *m, const char *attr, const char *value, rt_items *out);
/* How many stream records the writes so far must have made. */
size_t rt_model_records(const rt_model *m);
/* s holds exactly the model's records: per item, in order, with the right
 * event, images and TTL marks, each in the shard of its base partition. */
void rt_model_check_stream(const rt_model *m, const rt_stream *s);

/* ---- the CLI ---- */

/* Runs `lapse --coordinator URL args...` to completion; stdout and stderr
 * go to files named after tag in the run directory, whose paths are
 * written to out_path and err_path (each >= 600 bytes). Returns the exit
 * status. */
int rt_cli(const char *tag, const char *const *args, char *out_path, char *err_path);
/* Starts it without waiting; returns the pid. */
pid_t rt_cli_spawn(const char *tag, const char *const *args, char *out_path, char *err_path);
/* rt_cli, checking the exit status (the first stderr line is shown when
 * it differs); *lines receives stdout's lines (rt_free_lines). Returns
 * their count. */
size_t rt_cli_lines(const char *tag, const char *const *args, int want_exit, char ***lines);
/* Checks lines printed by `lapse stream`: each a record in DynamoDB
 * Streams JSON (eventName, Keys, eventID = shard-seq), creation times never
 * going back, each shard's sequence numbers increasing, TTL deletes marked
 * with principal lapse.ttl and the ttl object. Returns how many are TTL
 * deletes. */
size_t rt_check_stream_lines(char **lines, size_t n);
/* For rt_wait_for: a file with at least want lines. */
typedef struct rt_file_wait {
    const char *path;
    size_t want;
} rt_file_wait;
int rt_file_has_lines(void *arg, int last);

/* The lines of a file (caller frees each and the array). */
char **rt_read_lines(const char *path, size_t *n);
void rt_free_lines(char **lines, size_t n);

#endif
