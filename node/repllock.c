/* repllock.c: the striped apply lock of a source partition (repllock.h). */
#include "repllock.h"

pthread_mutex_t *repllock_of(node_server *ns, uint32_t table_id, uint32_t part)
{
    uint64_t h = ((uint64_t)table_id << 32 | part) * 0x9E3779B97F4A7C15ULL;
    return &ns->repl_locks[(h >> 40) % NODE_REPL_LOCKS];
}
