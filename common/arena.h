/*
 * arena.h: a bump allocator for short-lived trees (protobuf messages built for
 * one request or reply). Everything allocated from an arena is freed at once
 * by arena_fini; nothing is freed individually.
 *
 * Not thread-safe: an arena belongs to one thread at a time.
 *
 * Invariants:
 *  1. Every pointer returned is aligned for any type (max_align_t) and its
 *     memory is zeroed.
 */
#ifndef LAPSE_ARENA_H
#define LAPSE_ARENA_H

#include <stddef.h>

typedef struct arena_block arena_block;

typedef struct arena {
    arena_block *head; /* owned list of blocks, newest first */
} arena;

void arena_init(arena *a);
void arena_fini(arena *a); /* frees every block; a may be reused after arena_init */
/* Returns n zeroed bytes valid until arena_fini, or NULL on OOM. */
void *arena_alloc(arena *a, size_t n);
/* Copies; NULL on OOM. arena_strndup NUL-terminates. */
void *arena_memdup(arena *a, const void *p, size_t n);
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);

#endif
