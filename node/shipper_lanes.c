/*
 * shipper_lanes.c: finding and marking the shipper's lanes, and its
 * backoff (shipper_int.h), shared by the workers (shipper.c), the rounds
 * (shipper_round.c) and the acks thread (shipper_acks.c); it calls none of them.
 */
#include "shipper_int.h"

int64_t shipper_next_backoff(int64_t cur)
{
    if (cur <= 0) {
        return SHIPPER_BACKOFF_MIN_MS;
    }
    return cur * 2 > SHIPPER_BACKOFF_MAX_MS ? SHIPPER_BACKOFF_MAX_MS : cur * 2;
}

source *shipper_source(shipper *s, uint32_t table_id, uint32_t part)
{
    size_t lo = 0, hi = s->nsources;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        source *x = &s->sources[mid];
        if (x->table_id == table_id && x->part == part) {
            return x;
        }
        if (x->table_id < table_id || (x->table_id == table_id && x->part < part)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

lane *shipper_lane(source *src, uint32_t dest_id)
{
    for (size_t i = 0; src != NULL && i < src->nlanes; i++) {
        if (src->lanes[i].dest == dest_id) {
            return &src->lanes[i];
        }
    }
    return NULL;
}

void shipper_mark_dirty(shipper *s, lane *l)
{
    l->dirty = 1;
    s->dests[l->di].has_dirty = 1;
}
