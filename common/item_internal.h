/*
 * item_internal.h: what item.c and item_codec.c share; not for other modules.
 *
 * Invariant: the array of an L or M value with n elements is always
 * allocated to item_cap_for(n) elements, so appending reallocs exactly when
 * n reaches a power of two (the value structs carry no capacity field).
 */
#ifndef LAPSE_ITEM_INTERNAL_H
#define LAPSE_ITEM_INTERNAL_H

#include <stddef.h>

/* The allocated element count for an L/M array of n elements: the smallest
 * power of two >= n (1 for n == 0). */
size_t item_cap_for(size_t n);

#endif
