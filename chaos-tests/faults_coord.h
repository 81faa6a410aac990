/*
 * faults_coord.h: the control-plane scenarios of faults.h (create-table,
 * ttl-enable, etcd-member-kill, coordinator-stop), run by faults_run. Each
 * takes the scenario's random numbers and n, how many times it has run.
 *
 * Thread-safety: main thread only.
 */
#ifndef LAPSE_CHAOS_FAULTS_COORD_H
#define LAPSE_CHAOS_FAULTS_COORD_H

#include <stdint.h>

#include "run.h"

/* kill -9 of the coordinator during a CreateTable. */
void faults_coord_create(run *r, uint64_t *rng, int n);
/* kill -9 of the coordinator during UpdateTimeToLive's propagation. */
void faults_coord_ttl(run *r, uint64_t *rng, int n);
/* On etcd: kill -9 of an etcd member during a CreateTable. */
void faults_coord_etcd_kill(run *r, uint64_t *rng, int n);
/* On etcd: SIGSTOP of the leading coordinator past its lease. */
void faults_coord_stop(run *r, uint64_t *rng, int n);

#endif
