/*
 * wire_key.c: key definitions (a table's or an index's partition or sort key)
 * <-> protobuf-c messages, shared by the table schema (wire_pmap.c) and its
 * indexes (wire_index.c). Contract in rpc_internal.h.
 */
#include <string.h>

#include "../common/lapse_err.h"
#include "rpc_internal.h"

static Lapse__KeyType key_type_to_pb(attr_type t)
{
    switch (t) {
    case ATTR_S:
        return LAPSE__KEY_TYPE__KEY_S;
    case ATTR_N:
        return LAPSE__KEY_TYPE__KEY_N;
    case ATTR_B:
        return LAPSE__KEY_TYPE__KEY_B;
    default:
        return LAPSE__KEY_TYPE__KEY_NONE;
    }
}

Lapse__KeyDef *wire_key_to_pb(arena *a, const key_def *k)
{
    Lapse__KeyDef *pb = arena_alloc(a, sizeof *pb);
    if (pb == NULL) {
        return NULL;
    }
    lapse__key_def__init(pb);
    if ((pb->name = arena_strdup(a, k->name)) == NULL) {
        return NULL;
    }
    pb->type = key_type_to_pb(k->type);
    return pb;
}

int wire_key_from_pb(const Lapse__KeyDef *pb, key_def *out, const char *what, char *err,
                     size_t errlen)
{
    const char *name = pb->name != NULL ? pb->name : "";
    size_t len = strnlen(name, SCHEMA_MAX_KEY_NAME + 1);
    if (len == 0) {
        set_err(err, errlen, "%s has no name", what);
        return LAPSE_EINVAL;
    }
    if (len > SCHEMA_MAX_KEY_NAME) {
        set_err(err, errlen, "%s name longer than %d bytes", what, SCHEMA_MAX_KEY_NAME);
        return LAPSE_EINVAL;
    }
    switch (pb->type) {
    case LAPSE__KEY_TYPE__KEY_S:
        out->type = ATTR_S;
        break;
    case LAPSE__KEY_TYPE__KEY_N:
        out->type = ATTR_N;
        break;
    case LAPSE__KEY_TYPE__KEY_B:
        out->type = ATTR_B;
        break;
    default:
        set_err(err, errlen, "%s \"%.64s\" has type %d; want S, N or B", what, name, (int)pb->type);
        return LAPSE_EINVAL;
    }
    memcpy(out->name, name, len + 1);
    return 0;
}
