/*
 * leader.h: which coordinator leads, for coordinators on etcd (--etcd).
 *
 * Every coordinator holds an etcd lease (2 s, renewed every 500 ms) and
 * campaigns with it in the election <prefix>coordinator/leader, proclaiming
 * its listen URL. The one etcd elects loads the catalog from etcd (nodes keep
 * their stored states; each UP one gets a heartbeat timeout from then to be
 * heard from, as if it had just heartbeated), fences its saves with its
 * leader key (catalog_etcd.h) and serves every call; the others forward each
 * call to it (leader_forward) and keep campaigning.
 *
 *              campaign won: leader_take_over
 *   FOLLOWER -------------------------------------> LEADING
 *      ^   (forwards calls)                 (serves, commits fenced)
 *      |                                            |
 *      +--------------------------------------------+
 *        lease lost or renewed under another id, a save refused or
 *        failed (server_commit drops s->leading), or stopping:
 *        leader thread steps down (resigns while it can)
 *
 * Thread-safety: one leader thread per server; leader_forward runs on rpc
 * workers, several at once.
 *
 * Invariants:
 *  1. s->leading is 1 only while this coordinator's state was loaded after
 *     it won the election and its fence is set; it drops before anything
 *     else when a save fails, so no later save is attempted on stale state.
 *  2. Even a coordinator that believes it leads (stalled past its lease,
 *     then resumed) cannot commit: etcd checks the fence in every save.
 *  3. A call is forwarded at most once (Request.forwarded).
 *  4. It serves only while the lease it won with is certain to live more
 *     than SERVER_LEAD_MARGIN_MS (server_leads reads the keeper's clock,
 *     not the leader thread's view), so one stalled past its lease forwards
 *     from the instant it resumes. An answer that decides something without
 *     a save (a join already made) is confirmed by etcd first
 *     (server_confirm), as a save would be fenced.
 */
#ifndef LAPSE_COORD_LEADER_H
#define LAPSE_COORD_LEADER_H

#include "../rpc/rpc.h"
#include "server.h"

/* Starts the lease keeper and the leader thread (main.c, after
 * server_start). Returns 0 or an error. REQUIRES: s->ec set. */
int leader_start(server *s, char *err, size_t errlen);
/* Stops campaigning, steps down (resigning, and revoking the lease so
 * another coordinator takes over at once); calls go on being forwarded
 * until server_close. Accepts a server never started. REQUIRES: before
 * server_close. */
void leader_stop(server *s);

/* Answers req with the leader's reply, or EUNAVAILABLE saying why no
 * leader could be asked. */
void leader_forward(server *s, const Lapse__Request *req, Lapse__Response *resp, arena *a,
                    int64_t deadline_mono_ms);

#endif
