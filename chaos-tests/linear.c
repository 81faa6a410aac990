/*
 * linear.c: the register linearizability check. See linear.h.
 *
 * The search walks a doubly linked list of call and return events in time
 * order. At a call it tries to place that operation next (the register
 * model must allow it, and the set of placed operations with the new value
 * must be new to the cache); placed operations leave the list. At a return
 * whose operation is not placed, the last placement is undone and the next
 * candidate after it is tried. The list empties exactly when some order of
 * every operation respects both real time and the register.
 */
#include "linear.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIN_DEFAULT_STEPS 50000000L
#define LIN_MAX_CACHE_WORDS (64u << 20) /* 512 MB of placed-sets */

typedef struct ent {
    int64_t t;
    int op; /* index into the checked operations */
    int is_call;
    struct ent *match; /* a call's return */
    struct ent *prev, *next;
} ent;

typedef struct cache {
    size_t words;     /* per placed-set */
    uint64_t *sets;   /* entry i's set at sets + i * words */
    uint64_t *states; /* entry i's register value */
    size_t n, cap;    /* entries */
    int64_t *slots;   /* open addressing: entry index + 1, 0 empty */
    uint64_t *hashes; /* per slot */
    size_t nslots;
} cache;

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Whether the register model lets o act on *state; if so, *state becomes
 * the value after it. */
static int step(const lin_op *o, uint64_t *state)
{
    switch (o->kind) {
    case LIN_READ:
        return *state == o->value;
    case LIN_WRITE:
        *state = o->value;
        return 1;
    case LIN_CAS:
        if (o->outcome == LIN_OK) {
            if (*state != o->expect) {
                return 0;
            }
            *state = o->value;
            return 1;
        }
        if (o->outcome == LIN_FAILED) {
            return *state != o->expect;
        }
        if (*state == o->expect) {
            *state = o->value;
        }
        return 1;
    }
    return 0;
}

static int cmp_ent(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    /* At one instant a call comes first: the two count as concurrent. */
    if (x->is_call != y->is_call) {
        return x->is_call ? -1 : 1;
    }
    return x->op - y->op;
}

static int cache_grow_slots(cache *c)
{
    size_t ns = c->nslots ? c->nslots * 2 : 1024;
    int64_t *slots = calloc(ns, sizeof(*slots));
    uint64_t *hashes = calloc(ns, sizeof(*hashes));
    if (slots == NULL || hashes == NULL) {
        free(slots);
        free(hashes);
        return -1;
    }
    for (size_t i = 0; i < c->nslots; i++) {
        if (c->slots[i] != 0) {
            size_t j = c->hashes[i] & (ns - 1);
            while (slots[j] != 0) {
                j = (j + 1) & (ns - 1);
            }
            slots[j] = c->slots[i];
            hashes[j] = c->hashes[i];
        }
    }
    free(c->slots);
    free(c->hashes);
    c->slots = slots;
    c->hashes = hashes;
    c->nslots = ns;
    return 0;
}

/* Adds (set, state) unless present. Returns 1 when added, 0 when it was
 * there, -1 when out of memory or over the cache bound. */
static int cache_add(cache *c, const uint64_t *set, uint64_t state, uint64_t hash)
{
    hash = mix(hash ^ state);
    if ((c->n + 1) * 2 > c->nslots && cache_grow_slots(c) != 0) {
        return -1;
    }
    size_t j = hash & (c->nslots - 1);
    for (; c->slots[j] != 0; j = (j + 1) & (c->nslots - 1)) {
        size_t e = (size_t)c->slots[j] - 1;
        if (c->hashes[j] == hash && c->states[e] == state &&
            memcmp(c->sets + e * c->words, set, c->words * sizeof(*set)) == 0) {
            return 0;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        if (cap * c->words > LIN_MAX_CACHE_WORDS) {
            return -1;
        }
        uint64_t *sets = realloc(c->sets, cap * c->words * sizeof(*sets));
        if (sets == NULL) {
            return -1;
        }
        c->sets = sets;
        uint64_t *states = realloc(c->states, cap * sizeof(*states));
        if (states == NULL) {
            return -1;
        }
        c->states = states;
        c->cap = cap;
    }
    memcpy(c->sets + c->n * c->words, set, c->words * sizeof(*set));
    c->states[c->n] = state;
    c->slots[j] = (int64_t)++c->n;
    c->hashes[j] = hash;
    return 1;
}

static void cache_free(cache *c)
{
    free(c->sets);
    free(c->states);
    free(c->slots);
    free(c->hashes);
}

static void lift(ent *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev; /* a call's next is never NULL: its return follows */
    ent *m = e->match;
    m->prev->next = m->next;
    if (m->next != NULL) {
        m->next->prev = m->prev;
    }
}

static void unlift(ent *e)
{
    ent *m = e->match;
    m->prev->next = m;
    if (m->next != NULL) {
        m->next->prev = m;
    }
    e->prev->next = e;
    e->next->prev = e;
}

typedef struct placed {
    ent *call;
    uint64_t state; /* before it */
} placed;

/* One search over ops[0..n), each returning at ret[i] (INT64_MAX:
 * unbounded). orig[i] is its index in the caller's array. */
static lin_result search(const lin_op *ops, const int64_t *ret, const size_t *orig, size_t n,
                         long max_steps)
{
    lin_result res = {.verdict = LIN_LINEARIZABLE};
    if (n == 0) {
        return res;
    }
    ent *ev = calloc(2 * n, sizeof(*ev));
    placed *stack = calloc(n, sizeof(*stack));
    cache c = {.words = (n + 63) / 64};
    uint64_t *set = calloc(c.words, sizeof(*set));
    uint64_t *keys = calloc(n, sizeof(*keys));
    int *ret_at = calloc(n, sizeof(*ret_at));
    if (ev == NULL || stack == NULL || set == NULL || keys == NULL || ret_at == NULL) {
        res.verdict = LIN_UNDECIDED;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        ev[2 * i] = (ent){.t = ops[i].call_us, .op = (int)i, .is_call = 1};
        ev[2 * i + 1] = (ent){.t = ret[i], .op = (int)i, .is_call = 0};
        keys[i] = mix(0x51ed27eULL + i);
    }
    qsort(ev, 2 * n, sizeof(*ev), cmp_ent);
    for (size_t i = 0; i < 2 * n; i++) {
        if (!ev[i].is_call) {
            ret_at[ev[i].op] = (int)i;
        }
    }
    ent head = {0};
    ent *prev = &head;
    for (size_t i = 0; i < 2 * n; i++) {
        if (ev[i].is_call) {
            ev[i].match = &ev[ret_at[ev[i].op]];
        }
        ev[i].prev = prev;
        prev->next = &ev[i];
        prev = &ev[i];
    }
    uint64_t state = 0, hash = 0;
    size_t depth = 0, stuck_depth = 0;
    int stuck_set = 0;
    ent *e = head.next;
    while (head.next != NULL) {
        if (++res.steps > max_steps) {
            res.verdict = LIN_UNDECIDED;
            goto out;
        }
        if (e->is_call) {
            uint64_t next = state;
            if (step(&ops[e->op], &next)) {
                size_t w = (size_t)e->op / 64;
                uint64_t bit = 1ULL << ((size_t)e->op % 64);
                set[w] |= bit;
                int added = cache_add(&c, set, next, hash ^ keys[e->op]);
                if (added < 0) {
                    res.verdict = LIN_UNDECIDED;
                    goto out;
                }
                if (added) {
                    stack[depth++] = (placed){e, state};
                    if (depth > res.longest) {
                        res.longest = depth;
                    }
                    state = next;
                    hash ^= keys[e->op];
                    lift(e);
                    e = head.next;
                    continue;
                }
                set[w] &= ~bit;
            }
            e = e->next;
            continue;
        }
        /* A return whose operation could not be placed before it. */
        if (!stuck_set || depth > stuck_depth) {
            res.stuck = orig[e->op];
            stuck_depth = depth;
            stuck_set = 1;
        }
        if (depth == 0) {
            res.verdict = LIN_VIOLATION;
            goto out;
        }
        placed p = stack[--depth];
        state = p.state;
        hash ^= keys[p.call->op];
        set[(size_t)p.call->op / 64] &= ~(1ULL << ((size_t)p.call->op % 64));
        unlift(p.call);
        e = p.call->next;
    }
out:
    free(ev);
    free(stack);
    free(set);
    free(keys);
    free(ret_at);
    cache_free(&c);
    return res;
}

/* The return bound of each unknown operation: the earliest return of an
 * operation that saw its value (a read of it, a cas expecting it that took
 * effect or was itself bounded), INT64_MAX when none did. */
static void bound_unknown(const lin_op *ops, size_t n, int64_t *ret)
{
    for (size_t i = 0; i < n; i++) {
        ret[i] = ops[i].outcome == LIN_UNKNOWN ? INT64_MAX : ops[i].ret_us;
    }
    /* A bounded unknown cas bounds the write it expected: repeat until
     * nothing moves (each round fixes at least one more, so n rounds do). */
    for (size_t round = 0; round <= n; round++) {
        int moved = 0;
        for (size_t i = 0; i < n; i++) {
            if (ops[i].outcome != LIN_UNKNOWN) {
                continue;
            }
            for (size_t j = 0; j < n; j++) {
                const lin_op *o = &ops[j];
                int saw = (o->kind == LIN_READ && o->value == ops[i].value) ||
                          (o->kind == LIN_CAS && o->outcome != LIN_FAILED &&
                           o->expect == ops[i].value && ret[j] != INT64_MAX);
                if (j != i && saw && ret[j] < ret[i]) {
                    ret[i] = ret[j];
                    moved = 1;
                }
            }
        }
        if (!moved) {
            break;
        }
    }
}

lin_result lin_check(const lin_op *ops, size_t n, long max_steps)
{
    lin_result res = {.verdict = LIN_UNDECIDED};
    if (max_steps <= 0) {
        max_steps = LIN_DEFAULT_STEPS;
    }
    int64_t *ret = calloc(n ? n : 1, sizeof(*ret));
    lin_op *keep = calloc(n ? n : 1, sizeof(*keep));
    int64_t *keep_ret = calloc(n ? n : 1, sizeof(*keep_ret));
    size_t *orig = calloc(n ? n : 1, sizeof(*orig));
    if (ret == NULL || keep == NULL || keep_ret == NULL || orig == NULL) {
        goto out;
    }
    bound_unknown(ops, n, ret);
    /* First pass: without the unknown operations nobody saw. */
    size_t m = 0, unseen = 0;
    for (size_t i = 0; i < n; i++) {
        if (ret[i] == INT64_MAX) {
            unseen++;
            continue;
        }
        keep[m] = ops[i];
        keep_ret[m] = ret[i];
        orig[m++] = i;
    }
    res = search(keep, keep_ret, orig, m, max_steps);
    if (res.verdict != LIN_VIOLATION || unseen == 0) {
        goto out;
    }
    /* Second: with the unseen ones that may explain a refused cas, that
     * is, called before one returned, unbounded. One called later can be
     * moved to the end of any order: nothing after it could tell it took
     * effect. */
    int64_t last_refusal = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].outcome == LIN_FAILED && ops[i].ret_us > last_refusal) {
            last_refusal = ops[i].ret_us;
        }
    }
    size_t m2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (ret[i] != INT64_MAX || ops[i].call_us < last_refusal) {
            keep[m2] = ops[i];
            keep_ret[m2] = ret[i];
            orig[m2++] = i;
        }
    }
    if (m2 == m) {
        goto out;
    }
    long first = res.steps;
    res = search(keep, keep_ret, orig, m2, max_steps - first);
    res.steps += first;
out:
    free(ret);
    free(keep);
    free(keep_ret);
    free(orig);
    return res;
}

void lin_describe(const lin_op *op, int64_t t0_us, char *buf, size_t len)
{
    static const char *const outcomes[] = {"OK", "FAILED (condition false)", "UNKNOWN"};
    char what[96], when[64];
    if (op->kind == LIN_READ) {
        if (op->value == 0) {
            snprintf(what, sizeof(what), "read saw nothing");
        } else {
            snprintf(what, sizeof(what), "read saw %" PRIu64, op->value);
        }
    } else if (op->kind == LIN_WRITE) {
        snprintf(what, sizeof(what), "write %" PRIu64 " %s", op->value, outcomes[op->outcome]);
    } else {
        snprintf(what, sizeof(what), "cas %" PRIu64 "->%" PRIu64 " %s", op->expect, op->value,
                 outcomes[op->outcome]);
    }
    double call = (double)(op->call_us - t0_us) / 1e6;
    if (op->outcome == LIN_UNKNOWN) {
        snprintf(when, sizeof(when), "+%.6f s..(no reply)", call);
    } else {
        snprintf(when, sizeof(when), "+%.6f..+%.6f s", call, (double)(op->ret_us - t0_us) / 1e6);
    }
    snprintf(buf, len, "%s by thread %d, %s", what, op->thread, when);
}
