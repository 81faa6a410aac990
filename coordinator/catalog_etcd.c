/* catalog_etcd.c: the coordinator's state in etcd. Contract in
 * catalog_etcd.h, format in docs/coordinator.md. */
#include "catalog_etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/lapse_err.h"

struct catalog_etcd {
    etcd *ec;              /* borrowed */
    const etcd_keys *keys; /* borrowed */
    int64_t pmap_mod_rev;  /* the map key's revision as last read or written; 0: absent */
    char *fence_key;       /* owned; NULL: no fence, saves refused */
    int64_t fence_rev;
};

int catalog_etcd_open(catalog_etcd **out, etcd *ec, const etcd_keys *keys, char *err, size_t errlen)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    (*out)->ec = ec;
    (*out)->keys = keys;
    return 0;
}

void catalog_etcd_close(catalog_etcd *c)
{
    if (c != NULL) {
        free(c->fence_key);
        free(c);
    }
}

int catalog_etcd_load(catalog_etcd *c, catalog_state *st, char *err, size_t errlen)
{
    etcd_kvs kvs;
    int rv = etcd_range(c->ec, c->keys->catalog, 1, 0, 0, &kvs, err, errlen);
    if (rv != 0) {
        return rv;
    }
    const etcd_kv *pm = NULL, *id = NULL;
    for (size_t i = 0; i < kvs.n; i++) {
        if (strcmp(kvs.kv[i].key, c->keys->pmap) == 0) {
            pm = &kvs.kv[i];
        } else if (strcmp(kvs.kv[i].key, c->keys->next_table_id) == 0) {
            id = &kvs.kv[i];
        }
    }
    rv = catalog_decode(pm != NULL ? pm->value : NULL, pm != NULL ? pm->value_len : 0, pm != NULL,
                        id != NULL ? id->value : NULL, id != NULL ? id->value_len : 0, id != NULL,
                        st, err, errlen);
    if (rv == 0) {
        c->pmap_mod_rev = pm != NULL ? pm->mod_rev : 0;
    }
    etcd_kvs_fini(&kvs);
    return rv;
}

void catalog_etcd_fence(catalog_etcd *c, const char *key, int64_t rev)
{
    free(c->fence_key);
    c->fence_key = key != NULL ? strdup(key) : NULL;
    c->fence_rev = key != NULL ? rev : 0;
}

/* Writes st under the compares cmp[0..n). */
static int put_state(catalog_etcd *c, const etcd_cmp *cmp, size_t n, const catalog_state *st,
                     int *succeeded, char *err, size_t errlen)
{
    buf packed;
    buf_init(&packed);
    uint8_t id[4];
    int rv = catalog_encode(st, &packed, id, err, errlen);
    if (rv != 0) {
        buf_fini(&packed);
        return rv;
    }
    etcd_op ops[] = {
        {.kind = ETCD_OP_PUT, .key = c->keys->pmap, .value = packed.data, .value_len = packed.len},
        {.kind = ETCD_OP_PUT, .key = c->keys->next_table_id, .value = id, .value_len = sizeof(id)},
    };
    etcd_txn_result res;
    rv = etcd_txn(c->ec, cmp, n, ops, 2, NULL, 0, &res, err, errlen);
    buf_fini(&packed);
    if (rv != 0) {
        return rv;
    }
    *succeeded = res.succeeded;
    if (res.succeeded) {
        c->pmap_mod_rev = res.revision; /* both puts happened at this revision */
    }
    etcd_txn_result_fini(&res);
    return 0;
}

/* The two compares of invariant 2: the fence holds, and the map key is
 * where this catalog last saw it. REQUIRES: c->fence_key set. */
static void fenced(const catalog_etcd *c, etcd_cmp cmp[2])
{
    cmp[0] =
        (etcd_cmp){.key = c->fence_key, .target = ETCD_CREATE, .op = ETCD_EQ, .num = c->fence_rev};
    cmp[1] =
        (etcd_cmp){.key = c->keys->pmap, .target = ETCD_MOD, .op = ETCD_EQ, .num = c->pmap_mod_rev};
}

int catalog_etcd_save(catalog_etcd *c, const catalog_state *st, char *err, size_t errlen)
{
    if (c->fence_key == NULL) {
        snprintf(err, errlen, "this coordinator does not lead: it writes nothing");
        return LAPSE_ESTATE;
    }
    etcd_cmp cmp[2];
    fenced(c, cmp);
    int ok = 0;
    int rv = put_state(c, cmp, 2, st, &ok, err, errlen);
    if (rv == 0 && !ok) {
        snprintf(err, errlen,
                 "etcd refused the change: this coordinator no longer leads, or the catalog "
                 "changed since it read it (revision %lld)",
                 (long long)c->pmap_mod_rev);
        return LAPSE_ESTATE;
    }
    return rv;
}

int catalog_etcd_confirm(catalog_etcd *c, char *err, size_t errlen)
{
    if (c->fence_key == NULL) {
        snprintf(err, errlen, "this coordinator does not lead: it confirms nothing");
        return LAPSE_ESTATE;
    }
    etcd_cmp cmp[2];
    fenced(c, cmp);
    etcd_txn_result res;
    int rv = etcd_txn(c->ec, cmp, 2, NULL, 0, NULL, 0, &res, err, errlen);
    if (rv != 0) {
        return rv;
    }
    int ok = res.succeeded;
    etcd_txn_result_fini(&res);
    if (!ok) {
        snprintf(err, errlen,
                 "etcd says this coordinator no longer leads, or the catalog changed since it "
                 "read it (revision %lld)",
                 (long long)c->pmap_mod_rev);
        return LAPSE_ESTATE;
    }
    return 0;
}

int catalog_etcd_import(catalog_etcd *c, const catalog_state *st, char *err, size_t errlen)
{
    etcd_cmp absent = {.key = c->keys->pmap, .target = ETCD_CREATE, .op = ETCD_EQ, .num = 0};
    int ok = 0;
    int rv = put_state(c, &absent, 1, st, &ok, err, errlen);
    if (rv == 0 && !ok) {
        snprintf(err, errlen, "cluster %s already has a catalog in etcd: nothing imported",
                 c->keys->prefix);
        return LAPSE_EEXISTS;
    }
    return rv;
}
