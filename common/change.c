/*
 * change.c: the change record encoding (see change.h). Layout, all integers
 * big-endian (docs/replication.md, "The change record"):
 *
 *   u8 version (1) | u32 table | u32 part | u64 seq | u64 stream seq |
 *   i64 commit ms | u8 event | u8 principal
 *   [principal TTL: u8 name len | name | i64 expires at ms | i64 deleted at ms]
 *   u32 keys len | keys
 *   u8 has old [| u32 len | old image]
 *   u8 has new [| u32 len | new image]
 *
 * The decoder treats its input as untrusted (it arrives from another node
 * or from disk): every length is checked against the bytes left before it
 * is used, and the items inside are checked with item_encoded_get, which
 * accepts exactly what item_decode accepts.
 */
#include "change.h"

#include <stdlib.h>
#include <string.h>

#include "item.h"
#include "lapse_err.h"

#define HEAD_BYTES 35 /* version through principal */

static int event_ok(const change_record *r)
{
    int has_old = r->old_image.data != NULL, has_new = r->new_image.data != NULL;
    switch (r->event) {
    case CHANGE_INSERT:
        return !has_old && has_new;
    case CHANGE_MODIFY:
        return has_old && has_new;
    case CHANGE_REMOVE:
        return !has_new;
    default:
        return 0;
    }
}

static int principal_ok(const change_record *r)
{
    if (r->principal == CHANGE_USER) {
        return 1;
    }
    return r->principal == CHANGE_TTL && r->event == CHANGE_REMOVE && r->ttl_attr.data != NULL &&
           r->ttl_attr.len >= 1 && r->ttl_attr.len <= CHANGE_MAX_ATTR_NAME;
}

/* ======================================================================== */
/* Encoding                                                                 */
/* ======================================================================== */

static int put_bytes(buf *out, const change_bytes *b)
{
    int rv;
    if (b->len > UINT32_MAX) {
        return LAPSE_EINVAL;
    }
    if ((rv = buf_append_u32be(out, (uint32_t)b->len)) != 0) {
        return rv;
    }
    return buf_append(out, b->data, b->len);
}

static int put_image(buf *out, const change_bytes *b)
{
    int rv;
    if ((rv = buf_append_byte(out, b->data != NULL)) != 0 || b->data == NULL) {
        return rv;
    }
    return put_bytes(out, b);
}

int change_encode(const change_record *r, buf *out)
{
    int rv;
    if (!event_ok(r) || !principal_ok(r) || r->keys.data == NULL || r->seq == 0) {
        return LAPSE_EINVAL;
    }
    size_t start = out->len;
    size_t need = HEAD_BYTES + 1 + CHANGE_MAX_ATTR_NAME + 16 + 4 + r->keys.len + 10 +
                  r->old_image.len + r->new_image.len;
    if ((rv = buf_reserve(out, need)) != 0) {
        return rv;
    }
    /* Nothing below can run out of memory after the reserve. */
    buf_append_byte(out, CHANGE_FORMAT_V1);
    buf_append_u32be(out, r->table_id);
    buf_append_u32be(out, r->part);
    buf_append_u64be(out, r->seq);
    buf_append_u64be(out, r->stream_seq);
    buf_append_u64be(out, (uint64_t)r->commit_ms);
    buf_append_byte(out, (uint8_t)r->event);
    buf_append_byte(out, (uint8_t)r->principal);
    if (r->principal == CHANGE_TTL) {
        buf_append_byte(out, (uint8_t)r->ttl_attr.len);
        buf_append(out, r->ttl_attr.data, r->ttl_attr.len);
        buf_append_u64be(out, (uint64_t)r->expires_at_ms);
        buf_append_u64be(out, (uint64_t)r->deleted_at_ms);
    }
    if ((rv = put_bytes(out, &r->keys)) != 0 || (rv = put_image(out, &r->old_image)) != 0 ||
        (rv = put_image(out, &r->new_image)) != 0) {
        out->len = start;
        if (out->data != NULL) {
            out->data[start] = 0;
        }
        return rv;
    }
    return 0;
}

/* ======================================================================== */
/* Decoding                                                                 */
/* ======================================================================== */

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static int take(reader *r, size_t n, const uint8_t **out)
{
    if ((size_t)(r->end - r->p) < n) {
        return LAPSE_ECORRUPT;
    }
    *out = r->p;
    r->p += n;
    return 0;
}

static int get_u8(reader *r, uint8_t *v)
{
    const uint8_t *p;
    if (take(r, 1, &p) != 0) {
        return LAPSE_ECORRUPT;
    }
    *v = p[0];
    return 0;
}

static int get_u64(reader *r, uint64_t *v)
{
    const uint8_t *p;
    if (take(r, 8, &p) != 0) {
        return LAPSE_ECORRUPT;
    }
    *v = buf_get_u64be(p);
    return 0;
}

/* An item_encode()d item of len bytes: checked as item_decode would. */
static int get_item(reader *r, change_bytes *b)
{
    const uint8_t *p;
    if (take(r, 4, &p) != 0) {
        return LAPSE_ECORRUPT;
    }
    uint32_t n = buf_get_u32be(p);
    if (take(r, n, &b->data) != 0) {
        return LAPSE_ECORRUPT;
    }
    b->len = n;
    attr_type type;
    const char *v = NULL;
    size_t vlen = 0;
    /* No attribute has an empty name: valid bytes give ENOTFOUND. */
    int rv = item_encoded_get(b->data, n, "", &type, &v, &vlen);
    return rv == LAPSE_ENOTFOUND ? 0 : (rv == LAPSE_ENOMEM ? rv : LAPSE_ECORRUPT);
}

static int get_image(reader *r, change_bytes *b)
{
    uint8_t has = 0;
    b->data = NULL;
    b->len = 0;
    if (get_u8(r, &has) != 0 || has > 1) {
        return LAPSE_ECORRUPT;
    }
    return has ? get_item(r, b) : 0;
}

static int decode_head(reader *r, change_record *out)
{
    const uint8_t *p;
    memset(out, 0, sizeof(*out));
    if (take(r, HEAD_BYTES, &p) != 0 || p[0] != CHANGE_FORMAT_V1) {
        return LAPSE_ECORRUPT;
    }
    out->table_id = buf_get_u32be(p + 1);
    out->part = buf_get_u32be(p + 5);
    out->seq = buf_get_u64be(p + 9);
    out->stream_seq = buf_get_u64be(p + 17);
    out->commit_ms = (int64_t)buf_get_u64be(p + 25);
    out->event = (change_event)p[33];
    out->principal = (change_principal)p[34];
    if (out->seq == 0 || out->event < CHANGE_INSERT || out->event > CHANGE_REMOVE ||
        (out->principal != CHANGE_USER && out->principal != CHANGE_TTL)) {
        return LAPSE_ECORRUPT;
    }
    return 0;
}

int change_decode_head(const void *data, size_t len, change_record *r)
{
    reader rd = {data, (const uint8_t *)data + len};
    if (data == NULL) {
        memset(r, 0, sizeof(*r));
        return LAPSE_ECORRUPT;
    }
    return decode_head(&rd, r);
}

int change_decode(const void *data, size_t len, change_record *r)
{
    int rv;
    reader rd = {data, (const uint8_t *)data + len};
    change_record x;
    if (data == NULL) {
        return LAPSE_ECORRUPT;
    }
    if ((rv = decode_head(&rd, &x)) != 0) {
        return rv;
    }
    if (x.principal == CHANGE_TTL) {
        uint8_t n = 0;
        uint64_t a = 0, b = 0;
        if (get_u8(&rd, &n) != 0 || n == 0 || take(&rd, n, &x.ttl_attr.data) != 0 ||
            memchr(x.ttl_attr.data, 0, n) != NULL || get_u64(&rd, &a) != 0 ||
            get_u64(&rd, &b) != 0) {
            return LAPSE_ECORRUPT;
        }
        x.ttl_attr.len = n;
        x.expires_at_ms = (int64_t)a;
        x.deleted_at_ms = (int64_t)b;
    }
    if ((rv = get_item(&rd, &x.keys)) != 0 || (rv = get_image(&rd, &x.old_image)) != 0 ||
        (rv = get_image(&rd, &x.new_image)) != 0) {
        return rv;
    }
    if (rd.p != rd.end || !event_ok(&x) || !principal_ok(&x)) {
        return LAPSE_ECORRUPT;
    }
    *r = x;
    return 0;
}

/* ======================================================================== */
/* Lists                                                                    */
/* ======================================================================== */

void change_list_init(change_list *l)
{
    memset(l, 0, sizeof(*l));
}

void change_list_fini(change_list *l)
{
    if (l == NULL) {
        return;
    }
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].data);
    }
    free(l->v);
    change_list_init(l);
}

int change_list_push(change_list *l, uint64_t seq, const void *data, size_t len)
{
    if (l->n == l->cap) {
        size_t nc = l->cap == 0 ? 16 : l->cap * 2;
        change_entry *v = realloc(l->v, nc * sizeof(*v));
        if (v == NULL) {
            return LAPSE_ENOMEM;
        }
        l->v = v;
        l->cap = nc;
    }
    uint8_t *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL) {
        return LAPSE_ENOMEM;
    }
    if (len > 0) {
        memcpy(copy, data, len);
    }
    l->v[l->n++] = (change_entry){seq, copy, len};
    l->bytes += len;
    return 0;
}
