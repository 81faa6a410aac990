/* run.c: the fault log and the progress phase of a run. Contract in run.h. */
#include "run.h"

#include <stdarg.h>
#include <stdio.h>

#include "../common/clock.h"

void flog_add(run *r, const char *fmt, ...)
{
    fault_entry fe;
    fe.wall_ms = clock_wall_now().ms;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fe.text, sizeof(fe.text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&r->flog.mu);
    if (r->flog.n < FAULTLOG_MAX) {
        r->flog.e[r->flog.n++] = fe;
    } else {
        r->flog.dropped++;
    }
    pthread_mutex_unlock(&r->flog.mu);
    if (!r->opt->quiet) {
        fprintf(stderr, "chaos: %+8.3fs %s\n", (double)(fe.wall_ms - r->start_wall_ms) / 1000.0,
                fe.text);
    }
}

void run_phase(run *r, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&r->phase_mu);
    va_start(ap, fmt);
    vsnprintf(r->phase, sizeof(r->phase), fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&r->phase_mu);
}
