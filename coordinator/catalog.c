/* catalog.c: the coordinator's durable state. Contract in catalog.h, format in
 * docs/coordinator.md. */
#include "catalog.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/arena.h"
#include "../common/buf.h"
#include "../common/lapse_err.h"
#include "../rpc/wire.h"
#include "../storage/db.h"

#define CF_META 0
static const char *const cf_names[] = {"meta"};

static const char key_pmap[] = "pmap";
static const char key_next_table_id[] = "next_table_id";

struct catalog {
    db *d; /* owned */
};

/* mkdir -p: creates dir and its missing parents. Returns 0 or errno. */
static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(path)) {
        return ENAMETOOLONG;
    }
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/') {
            continue;
        }
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            return errno;
        }
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return errno;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        return errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* Decodes the stored map. Returns 0, LAPSE_ECORRUPT or LAPSE_ENOMEM. */
static int decode_pmap(const void *bytes, size_t len, pmap **out, char *err, size_t errlen)
{
    Lapse__PartitionMap *pb = lapse__partition_map__unpack(NULL, len, bytes);
    if (pb == NULL) {
        snprintf(err, errlen, "stored partition map does not decode (%zu bytes)", len);
        return LAPSE_ECORRUPT;
    }
    char why[256] = "";
    int rv = wire_pmap_from_pb(pb, out, why, sizeof(why));
    lapse__partition_map__free_unpacked(pb, NULL);
    if (rv == LAPSE_ENOMEM) {
        snprintf(err, errlen, "out of memory decoding the stored partition map");
        return rv;
    }
    if (rv != 0) {
        snprintf(err, errlen, "stored partition map is invalid: %s", why);
        return LAPSE_ECORRUPT;
    }
    if (!pmap_check(*out)) {
        pmap_free(*out);
        *out = NULL;
        snprintf(err, errlen, "stored partition map breaks its invariants");
        return LAPSE_ECORRUPT;
    }
    return 0;
}

int catalog_decode(const void *pmap_bytes, size_t pmap_len, int has_pmap, const void *id_bytes,
                   size_t id_len, int has_id, catalog_state *st, char *err, size_t errlen)
{
    pmap *pm = NULL;
    int rv;
    if (has_pmap) {
        if ((rv = decode_pmap(pmap_bytes, pmap_len, &pm, err, errlen)) != 0) {
            return rv;
        }
    } else if ((pm = pmap_new()) == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    uint32_t next_id = 1;
    if (has_id) {
        if (id_len != 4) {
            rv = LAPSE_ECORRUPT;
            snprintf(err, errlen, "stored next_table_id has %zu bytes, expected 4", id_len);
            goto fail;
        }
        next_id = buf_get_u32be(id_bytes);
    }
    /* Invariant 4 of server.h, checked against the map itself. */
    for (size_t i = 0; i < pm->ntables; i++) {
        if (pm->tables[i].schema.id >= next_id) {
            rv = LAPSE_ECORRUPT;
            snprintf(err, errlen, "table %s has id %u but next_table_id is %u",
                     pm->tables[i].schema.name, pm->tables[i].schema.id, next_id);
            goto fail;
        }
    }
    st->pm = pm;
    st->next_table_id = next_id;
    return 0;

fail:
    pmap_free(pm);
    return rv;
}

static int load(catalog *c, catalog_state *st, char *err, size_t errlen)
{
    buf pm, id;
    buf_init(&pm);
    buf_init(&id);
    int has_pm = 0, has_id = 0;
    int rv = db_get(c->d, CF_META, key_pmap, strlen(key_pmap), &pm, &has_pm, err, errlen);
    if (rv == 0) {
        rv = db_get(c->d, CF_META, key_next_table_id, strlen(key_next_table_id), &id, &has_id, err,
                    errlen);
    }
    if (rv == 0) {
        rv = catalog_decode(pm.data, pm.len, has_pm, id.data, id.len, has_id, st, err, errlen);
    }
    buf_fini(&pm);
    buf_fini(&id);
    return rv;
}

int catalog_open(catalog **out, const char *dir, catalog_state *st, char *err, size_t errlen)
{
    *out = NULL;
    int e = mkdir_p(dir);
    if (e != 0) {
        snprintf(err, errlen, "cannot create data dir %s: %s", dir, strerror(e));
        return LAPSE_EIO;
    }
    catalog *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return LAPSE_ENOMEM;
    }
    db_options opt = {0};
    opt.create_if_missing = 1;
    opt.block_cache_bytes = 8u << 20; /* a few small keys */
    char why[512] = "";
    int rv = db_open(&c->d, dir, &opt, cf_names, sizeof(cf_names) / sizeof(cf_names[0]), why,
                     sizeof(why));
    if (rv != 0) {
        if (strstr(why, "lock") != NULL || strstr(why, "LOCK") != NULL) {
            snprintf(err, errlen,
                     "data dir %s is in use by another process (RocksDB lock held): %s", dir, why);
        } else {
            snprintf(err, errlen, "cannot open the catalog in %s: %s", dir, why);
        }
        catalog_close(c);
        return rv == LAPSE_ENOMEM ? rv : LAPSE_EIO;
    }
    if ((rv = load(c, st, err, errlen)) != 0) {
        catalog_close(c);
        return rv;
    }
    *out = c;
    return 0;
}

int catalog_encode(const catalog_state *st, buf *pmap_bytes, uint8_t id[4], char *err,
                   size_t errlen)
{
    arena a;
    arena_init(&a);
    int rv = 0;
    Lapse__PartitionMap *pb = wire_pmap_to_pb(&a, st->pm);
    size_t len = pb != NULL ? lapse__partition_map__get_packed_size(pb) : 0;
    buf_clear(pmap_bytes);
    if (pb == NULL || buf_reserve(pmap_bytes, len > 0 ? len : 1) != 0) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory encoding the partition map");
    } else {
        lapse__partition_map__pack(pb, pmap_bytes->data);
        pmap_bytes->len = len;
        uint32_t v = st->next_table_id;
        id[0] = (uint8_t)(v >> 24);
        id[1] = (uint8_t)(v >> 16);
        id[2] = (uint8_t)(v >> 8);
        id[3] = (uint8_t)v;
    }
    arena_fini(&a);
    return rv;
}

int catalog_save(catalog *c, const catalog_state *st, char *err, size_t errlen)
{
    buf packed;
    buf_init(&packed);
    uint8_t id[4];
    db_batch *b = NULL;
    int rv = catalog_encode(st, &packed, id, err, errlen);
    if (rv == 0 && (b = db_batch_new()) == NULL) {
        rv = LAPSE_ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
    if (rv == 0) {
        db_batch_put(b, c->d, CF_META, key_pmap, strlen(key_pmap), packed.data, packed.len);
        db_batch_put(b, c->d, CF_META, key_next_table_id, strlen(key_next_table_id), id,
                     sizeof(id));
        rv = db_write(c->d, b, 1, err, errlen);
    }
    db_batch_free(b);
    buf_fini(&packed);
    return rv;
}

void catalog_close(catalog *c)
{
    if (c == NULL) {
        return;
    }
    db_close(c->d);
    free(c);
}
