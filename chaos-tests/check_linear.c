/*
 * check_linear.c: invariant 8, per-key linearizability of the register
 * workload. See check.h, registers.h and linear.h.
 */
#include <inttypes.h>
#include <stdio.h>

#include "check_int.h"
#include "registers.h"

/* The last write or cas of h (other than h->ops[at]) that took effect and
 * returned before h->ops[at] was called, described into buf, or "none". */
static void last_write_before(const reg_history *h, size_t at, int64_t t0_us, char *buf, size_t len)
{
    const lin_op *best = NULL;
    for (size_t i = 0; i < h->n; i++) {
        const lin_op *o = &h->ops[i];
        if (i != at && o->kind != LIN_READ && o->outcome == LIN_OK &&
            o->ret_us < h->ops[at].call_us && (best == NULL || o->ret_us > best->ret_us)) {
            best = o;
        }
    }
    if (best == NULL) {
        snprintf(buf, len, "none");
    } else {
        lin_describe(best, t0_us, buf, len);
    }
}

void check_linear(run *r, check_out *out)
{
    registers *g = r->regs;
    if (g == NULL) {
        return;
    }
    out->checked[8] = 1;
    for (int k = 0; k < g->nkeys; k++) {
        const reg_history *h = &g->key[k];
        for (size_t i = 0; i < h->n; i++) {
            const lin_op *o = &h->ops[i];
            out->lin.calls++;
            out->lin.reads += o->kind == LIN_READ;
            out->lin.writes += o->kind != LIN_READ && o->outcome == LIN_OK;
            out->lin.cas_ok += o->kind == LIN_CAS && o->outcome == LIN_OK;
            out->lin.cas_failed += o->outcome == LIN_FAILED;
            out->lin.unknown += o->outcome == LIN_UNKNOWN;
        }
        lin_result res = lin_check(h->ops, h->n, 0);
        out->lin.keys++;
        out->lin.steps += res.steps;
        if (res.verdict == LIN_UNDECIDED) {
            out->lin.undecided++;
            continue;
        }
        if (res.verdict == LIN_LINEARIZABLE) {
            continue;
        }
        char key[32], where[96], found[256], before[160];
        reg_key_name(k, key, sizeof(key));
        snprintf(where, sizeof(where), "%.60s/%s", r->m.t[REG_TABLE].name, key);
        lin_describe(&h->ops[res.stuck], g->t0_us, found, sizeof(found));
        last_write_before(h, res.stuck, g->t0_us, before, sizeof(before));
        check_add(out, 8, where, NULL, 0, found,
                  "an order of its %zu calls that real time and a register allow (the longest "
                  "order placed %zu, then could not place the call found; the last write to "
                  "take effect before that call: %s)",
                  h->n, res.longest, before);
    }
}
