/*
 * check_int.h: what the checker's files (check.c, check_repl.c,
 * check_stream.c) share: filing a violation, naming keys and images (both
 * in check.c), and the snapshot of a base table that the stream and the
 * indexes are compared with.
 *
 * Thread-safety: main thread only, as check.h.
 */
#ifndef LAPSE_CHAOS_CHECK_INT_H
#define LAPSE_CHAOS_CHECK_INT_H

#include <stddef.h>
#include <stdint.h>

#include "../tests/streamread.h"
#include "check.h"

/* Counts a violation of invariant inv and keeps its details (the first
 * CHECK_MAX_DETAILS): where, the key's last call and when it returned (NULL
 * and 0 for non-item findings), what was found and, printf-style, what was
 * expected. */
void check_add(check_out *out, int inv, const char *where, const char *last_op,
               int64_t last_wall_ms, const char *found, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* check_add for key idx of t (where "table/k<idx>", its last call), or for
 * an item outside the model (idx < 0: where "table/<what>"). */
void check_add_key(check_out *out, int inv, const mtable *t, int idx, const char *what,
                   const char *found, const char *expected);

/* The model key of item it of t (its Id is "k<idx>" with idx < t->nkeys,
 * and its sort key, in the indexed table, 0), or -1. */
int check_key_index(const mtable *t, const lapse_item *it);
/* "absent", or the item's ver, Grp and TTL attribute, into buf. */
void check_brief(const lapse_item *it, char *buf, size_t len);

/* A base table as one scan found it (check_repl.c). */
typedef struct base_snap {
    int n;             /* the model table's nkeys */
    lapse_item **item; /* [n] owned; NULL: absent */
    long count;        /* items found */
    char foreign[96];  /* the Id of an item outside the model, or "" */
} base_snap;

/* Scans table t into *b (fresh; free with base_snap_free). Returns 0 or the
 * scan's error (message in *e). */
int base_snap_read(run *r, const mtable *t, base_snap *b, lapse_error *e);
void base_snap_free(base_snap *b);

/* Invariant 4: judges every record of s (t's whole stream) against the
 * model and against b, filing at most one violation per key (the first
 * problem found) plus one per broken shard. Adds to st->records,
 * ttl_removes. */
void check_stream(const mtable *t, const streamread *s, const base_snap *b, check_out *out,
                  repl_stats *st);

#endif
