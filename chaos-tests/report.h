/*
 * report.h: the text report of one chaos run (docs/chaos.md): options,
 * operations, the fault log, the settle time, the items checked by what was
 * expected of them, one line per invariant and every violation with the
 * faults around it.
 *
 * Thread-safety: main thread, after the run's threads are joined.
 */
#ifndef LAPSE_CHAOS_REPORT_H
#define LAPSE_CHAOS_REPORT_H

#include <stdio.h>

#include "check.h"
#include "run.h"

/* The --faults mask as text ("node-kill,stop-cont", "none") into buf. */
void report_faults_text(unsigned f, char *buf, size_t len);

/* Writes the report of run r to f; verbose adds the whole fault log. */
void report_write(FILE *f, run *r, const check_out *co, const char *run_dir, int verbose);

#endif
