/* arena.c: bump allocator (arena.h).
 *
 * Blocks are at least ARENA_BLOCK bytes; an allocation bigger than a quarter
 * block gets a block of its own, so one big string does not waste the rest
 * of the current block. Blocks are calloc'd, so memory comes back zeroed. */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK 4096

struct arena_block {
    arena_block *next;
    size_t used; /* bytes handed out from data */
    size_t cap;  /* bytes in data */
    alignas(max_align_t) unsigned char data[];
};

static size_t align_up(size_t n)
{
    size_t a = alignof(max_align_t);
    return (n + a - 1) & ~(a - 1);
}

void arena_init(arena *a)
{
    a->head = NULL;
}

void arena_fini(arena *a)
{
    if (a == NULL) {
        return;
    }
    arena_block *b = a->head;
    while (b != NULL) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

static arena_block *block_new(size_t cap)
{
    if (cap > SIZE_MAX - sizeof(arena_block)) {
        return NULL;
    }
    arena_block *b = calloc(1, sizeof(arena_block) + cap);
    if (b == NULL) {
        return NULL;
    }
    b->cap = cap;
    return b;
}

void *arena_alloc(arena *a, size_t n)
{
    if (n == 0) {
        n = 1;
    }
    if (n > SIZE_MAX / 2) {
        return NULL;
    }
    size_t sz = align_up(n);
    arena_block *b = a->head;
    if (b != NULL && b->cap - b->used >= sz) {
        void *p = b->data + b->used;
        b->used += sz;
        return p;
    }
    if (sz > ARENA_BLOCK / 4) {
        /* A dedicated block, linked behind the head so the head keeps serving
         * small allocations. */
        arena_block *big = block_new(sz);
        if (big == NULL) {
            return NULL;
        }
        big->used = sz;
        if (b == NULL) {
            a->head = big;
        } else {
            big->next = b->next;
            b->next = big;
        }
        return big->data;
    }
    arena_block *nb = block_new(ARENA_BLOCK);
    if (nb == NULL) {
        return NULL;
    }
    nb->next = a->head;
    a->head = nb;
    nb->used = sz;
    return nb->data;
}

void *arena_memdup(arena *a, const void *p, size_t n)
{
    void *q = arena_alloc(a, n);
    if (q != NULL && n > 0) {
        memcpy(q, p, n);
    }
    return q;
}

char *arena_strndup(arena *a, const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *q = arena_alloc(a, len + 1);
    if (q != NULL) {
        memcpy(q, s, len); /* q[len] is already 0 */
    }
    return q;
}

char *arena_strdup(arena *a, const char *s)
{
    return arena_strndup(a, s, strlen(s));
}
