/*
 * ddb_index.c: one secondary index as the gateway sees it (ddb_index.h).
 */
#include "ddb_index.h"

#include "ddb_meta.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"

/* The projections of tables the gateway's document records, by table and
 * creation time, so a read of an index the nodes keep whole does not read
 * that document from the cluster every time. A table's projections never
 * change (CreateTable writes them before it answers, and a table made again
 * is another key): one found is kept, and one found absent is asked again
 * after PROJ_ABSENT_MS (another gateway may be creating the table: the
 * same second as ddb_meta.c's ABSENT_RECHECK_MS). PROJ_SLOTS entries,
 * replaced in turn. */
#define PROJ_SLOTS 128
#define PROJ_ABSENT_MS 1000

typedef struct proj_slot {
    char key[300];       /* "<table>@<created_ms>"; "": free */
    int64_t until_ms;    /* monotonic; INT64_MAX for projections found */
    json_t *projections; /* owned; NULL: the document records none */
} proj_slot;

static proj_slot g_proj[PROJ_SLOTS];
static size_t g_proj_next;
static pthread_mutex_t g_proj_mu = PTHREAD_MUTEX_INITIALIZER;

/* 1 with *out (a copy the caller owns; NULL: none recorded) when key is
 * cached and fresh, else 0. */
static int proj_lookup(const char *key, json_t **out)
{
    int hit = 0;
    int64_t now = clock_mono_now().ms;
    pthread_mutex_lock(&g_proj_mu);
    for (size_t i = 0; i < PROJ_SLOTS && !hit; i++) {
        if (strcmp(g_proj[i].key, key) == 0 && g_proj[i].until_ms > now) {
            *out = g_proj[i].projections != NULL ? json_deep_copy(g_proj[i].projections) : NULL;
            hit = g_proj[i].projections == NULL || *out != NULL;
        }
    }
    pthread_mutex_unlock(&g_proj_mu);
    return hit;
}

/* Caches projections (borrowed, copied; NULL: none recorded) under key. */
static void proj_store(const char *key, json_t *projections)
{
    json_t *copy = projections != NULL ? json_deep_copy(projections) : NULL;
    if (projections != NULL && copy == NULL) {
        return;
    }
    pthread_mutex_lock(&g_proj_mu);
    proj_slot *slot = NULL;
    for (size_t i = 0; i < PROJ_SLOTS && slot == NULL; i++) {
        slot = strcmp(g_proj[i].key, key) == 0 ? &g_proj[i] : NULL;
    }
    if (slot == NULL) {
        slot = &g_proj[g_proj_next];
        g_proj_next = (g_proj_next + 1) % PROJ_SLOTS;
    }
    json_decref(slot->projections);
    snprintf(slot->key, sizeof slot->key, "%s", key);
    slot->projections = copy;
    slot->until_ms = copy != NULL ? INT64_MAX : clock_mono_now().ms + PROJ_ABSENT_MS;
    pthread_mutex_unlock(&g_proj_mu);
}

/* The gateway's projections of table (created at created_ms) into *meta as
 * {"Projections": ...} (or {} when none is recorded), from the cache or the
 * cluster. 0, or -1 with x's error set. */
static int projections_of(ddb_ctx *x, const char *table, int64_t created_ms, json_t **meta)
{
    char key[300];
    json_t *proj = NULL;
    snprintf(key, sizeof key, "%.255s@%" PRId64, table, created_ms);
    if (proj_lookup(key, &proj)) {
        *meta = proj != NULL ? json_pack("{s:o}", "Projections", proj) : json_object();
        return *meta != NULL ? 0 : ddb_req_fail(x, 500, "InternalServerError", "out of memory");
    }
    if (ddb_meta_get(x, table, created_ms, meta) != 0) {
        return -1;
    }
    proj_store(key, json_object_get(*meta, "Projections"));
    return 0;
}

int ddb_index_info(ddb_ctx *x, const char *table, const char *index, ddb_index *ix)
{
    lapse_error err;
    memset(ix, 0, sizeof *ix);
    ix->name = index;
    int rv = lapse_index_describe(x->c, table, index, &ix->li, &err);
    char pk[LAPSE_KEY_NAME_MAX + 1], sk[LAPSE_KEY_NAME_MAX + 1];
    if (rv == LAPSE_ENOTFOUND && lapse_key_schema(x->c, table, NULL, pk, sk, NULL, NULL) == 0) {
        return ddb_req_fail(x, 400, "ValidationException",
                            "The table does not have the specified index: %.255s", index);
    }
    if (rv != 0) {
        return ddb_req_lapse_fail(x, &err, table);
    }
    const lapse_index_info *li = &ix->li;
    ix->tpk = li->table_pk;
    ix->tsk = li->table_sk[0] != '\0' ? li->table_sk : NULL;
    ix->ipk = li->pk;
    ix->isk = li->sk[0] != '\0' ? li->sk : NULL;
    ix->ipk_type = li->pk_type;
    ix->isk_type = li->sk_type;
    ix->gsi = li->is_gsi;
    ix->projection = li->projection == LAPSE_PROJECT_KEYS ? "KEYS_ONLY" : "ALL";
    if (li->projection == LAPSE_PROJECT_KEYS) {
        return 0;
    }
    /* ALL on the nodes: INCLUDE when the gateway's document says so. */
    if (projections_of(x, table, li->table_created_ms, &ix->meta) != 0) {
        return -1;
    }
    json_t *proj = json_object_get(json_object_get(ix->meta, "Projections"), index);
    const char *given = json_string_value(json_object_get(proj, "ProjectionType"));
    if (given != NULL && strcmp(given, "INCLUDE") == 0) {
        ix->projection = "INCLUDE";
        ix->non_key = json_object_get(proj, "NonKeyAttributes");
    }
    return 0;
}

void ddb_index_fini(ddb_index *ix)
{
    json_decref(ix->meta);
    ix->meta = NULL;
}

/* Whether doc has attribute name with DynamoDB type letter type. */
static int has_typed(json_t *doc, const char *name, char type)
{
    json_t *v = json_object_get(doc, name);
    const char tag[2] = {type, '\0'};
    return json_is_object(v) && json_object_size(v) == 1 && json_object_get(v, tag) != NULL;
}

int ddb_index_holds(const ddb_index *ix, json_t *doc)
{
    return has_typed(doc, ix->ipk, ix->ipk_type) &&
           (ix->isk == NULL || has_typed(doc, ix->isk, ix->isk_type));
}

static void copy_attr(json_t *to, json_t *from, const char *name)
{
    json_t *v = name != NULL ? json_object_get(from, name) : NULL;
    if (v != NULL) {
        json_object_set(to, name, v);
    }
}

json_t *ddb_index_key(const ddb_index *ix, json_t *doc)
{
    json_t *k = json_object();
    if (k != NULL) {
        copy_attr(k, doc, ix->tpk);
        copy_attr(k, doc, ix->tsk);
        copy_attr(k, doc, ix->ipk);
        copy_attr(k, doc, ix->isk);
    }
    return k;
}

json_t *ddb_index_project(const ddb_index *ix, json_t *doc)
{
    if (strcmp(ix->projection, "ALL") == 0) {
        return json_incref(doc);
    }
    json_t *out = ddb_index_key(ix, doc);
    size_t i;
    json_t *a;
    json_array_foreach(ix->non_key, i, a)
    {
        copy_attr(out, doc, json_string_value(a));
    }
    return out;
}
