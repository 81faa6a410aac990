/*
 * logship_outbox.c: how much of a replicated partition's outbox its
 * primary may ship (logship.h, "The outbox on a replicated partition";
 * docs/replication.md).
 *
 * What the primary learns confirmed (logship_int.h, part_state.confirmed)
 * is a log seq; what the shipper needs is an outbox seq. The two are
 * paired by a mark read under the partition's stripe lock
 * (replog_outbox_mark): the outbox's last record and the log's last
 * record at one moment. A mark whose log seq is confirmed makes its outbox
 * records shippable (ob_safe). The shipper reads a new mark on each look;
 * the one it read before is usually confirmed by then (its round came
 * back), so the outbox follows the rounds one look behind, and a write's
 * own shipper_notify, sent after its round, finds its mark confirmed.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/log.h"
#include "../partition/replog.h"
#include "logship_int.h"

/* Takes the mark into ob_safe when its log seq is confirmed. REQUIRES:
 * ls->lock. Returns 1 when ob_safe moved. */
static int promote(part_state *p)
{
    if (p->ob_mark_log == 0 || p->confirmed < p->ob_mark_log) {
        return 0;
    }
    int moved = p->ob_mark_last > p->ob_safe;
    if (moved) {
        p->ob_safe = p->ob_mark_last;
    }
    p->ob_mark_log = p->ob_mark_last = 0;
    return moved;
}

int logship_confirmed_locked(part_state *p, uint64_t seq)
{
    if (seq <= p->confirmed) {
        return 0;
    }
    p->confirmed = seq;
    return p->ob_mark_log != 0 && promote(p);
}

void logship_tell_shipper(logship *ls, uint32_t table_id, uint32_t part)
{
    if (ls->on_confirmed != NULL) {
        ls->on_confirmed(ls->on_confirmed_arg, table_id, part);
    }
}

uint64_t logship_outbox_limit(logship *ls, const table_schema *t, uint32_t part, uint64_t last)
{
    if (schema_replication(t) < 2) {
        return UINT64_MAX;
    }
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, t->id, part);
    if (p != NULL) {
        promote(p);
    }
    uint64_t safe = p != NULL ? p->ob_safe : 0;
    pthread_mutex_unlock(&ls->lock);
    if (p == NULL) {
        return 0; /* out of memory: nothing until it can tell */
    }
    if (last <= safe) {
        return safe; /* no new mark needed: no store read, no stripe lock */
    }
    /* The stripe lock is taken with ls->lock released: the ship hook takes
     * ls->lock under the stripe lock. */
    uint64_t log_seq = 0;
    char err[256] = "";
    if (replog_outbox_mark(ls->ns->st, t->id, part, &log_seq, &last, err, sizeof(err)) != 0) {
        log_error("table \"%s\" partition %u: reading the outbox mark: %s", t->name, (unsigned)part,
                  err);
        return safe;
    }
    if (last <= safe) {
        return safe;
    }
    pthread_mutex_lock(&ls->lock);
    p->ob_mark_log = log_seq;
    p->ob_mark_last = last;
    if (!promote(p) && p->q_head == NULL && !p->shipping && p->lag_gen == p->lag_done) {
        /* Nothing on its way will confirm these records (a failed round,
         * a log this node took over as the new primary): the resync
         * thread's send_lag does, then calls on_confirmed. */
        p->lag_gen++;
    }
    safe = p->ob_safe;
    pthread_mutex_unlock(&ls->lock);
    return safe;
}

void logship_on_confirmed(logship *ls, void (*fn)(void *arg, uint32_t table_id, uint32_t part),
                          void *arg)
{
    ls->on_confirmed = fn;
    ls->on_confirmed_arg = arg;
}

void logship_forget_confirmed(logship *ls, uint32_t table_id, uint32_t part)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    if (p != NULL) {
        p->confirmed = p->ob_safe = p->ob_mark_log = p->ob_mark_last = 0;
        p->ob_trimmed = p->copy_trimmed = 0;
    }
    pthread_mutex_unlock(&ls->lock);
}

void logship_outbox_trimmed(logship *ls, uint32_t table_id, uint32_t part, uint64_t seq)
{
    pthread_mutex_lock(&ls->lock);
    part_state *p = logship_state(ls, table_id, part);
    if (p != NULL && seq > p->ob_trimmed) {
        p->ob_trimmed = seq;
    }
    pthread_mutex_unlock(&ls->lock);
}
