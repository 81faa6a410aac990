/*
 * pmap_int.h: what pmap.c shares with pmap_place.c, nothing else.
 */
#ifndef LAPSE_PMAP_INT_H
#define LAPSE_PMAP_INT_H

#include "pmap.h"

/* Appends a table with copies of pl's arrays. 0 or LAPSE_ENOMEM (pm
 * unchanged). */
int pmap_append_table(pmap *pm, const table_schema *schema, const pmap_placement *pl);
/* Whether pm has a table of schema's name or id already. */
int pmap_table_exists(const pmap *pm, const table_schema *schema);

#endif
