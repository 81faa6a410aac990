/*
 * rpc_frame.h: NNG's SP-over-TCP wire as the stream transport writes it by
 * hand, shared by its client (rpc_conn.c) and its server
 * (rpc_server_stream.c); docs/wire-protocol.md, "The stream client".
 * Internal to rpc/.
 *
 *   handshake  8 bytes: 00 'S' 'P' 00, the protocol (16-bit big-endian),
 *              00 00; req0 is 48, rep0 49
 *   message    an 8-byte big-endian length, then the body: a 4-byte
 *              big-endian request id with its top bit set, then the bytes
 *
 * The framing is pure functions over caller-owned memory; rpc_frame_out is
 * a connection's writing half on its plain socket, the same at both ends.
 * Thread-safety is the caller's (its connection lock).
 */
#ifndef LAPSE_RPC_FRAME_H
#define LAPSE_RPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"

#define RPC_FRAME_HDR 12 /* 8-byte length, 4-byte request id */
#define RPC_FRAME_HELLO 8
#define RPC_FRAME_INBUF_MIN (64u * 1024)    /* a receive buffer, grown for a larger message */
#define RPC_FRAME_INBUF_KEEP (1024u * 1024) /* one grown past this shrinks back once empty */

/* The handshakes each end sends: req0's (the client) and rep0's. */
extern const uint8_t rpc_frame_hello_req0[RPC_FRAME_HELLO];
extern const uint8_t rpc_frame_hello_rep0[RPC_FRAME_HELLO];

/* Appends a message (length, id, body) to b: all of it, or nothing.
 * Returns 0 or LAPSE_ENOMEM. */
int rpc_frame_append(buf *b, uint32_t id, const void *body, size_t len);

/* The first message of in[0..avail): 1 with its id and its body's place
 * (in + RPC_FRAME_HDR, *len bytes; the message takes RPC_FRAME_HDR + *len),
 * 0 when it is not all in yet, or -1 for one no SP peer sends (a length
 * under 4 or over RPC_MAX_MESSAGE_BYTES, an id without its top bit). */
int rpc_frame_next(const uint8_t *in, size_t avail, uint32_t *id, size_t *len);

/* After used bytes of a receive buffer (*in, *inlen of *incap) were taken:
 * moves the partial message left to the front and sizes the buffer for
 * the whole of it (growing it, or shrinking one past RPC_FRAME_INBUF_KEEP
 * back to RPC_FRAME_INBUF_MIN once what is left fits there: never under the
 * partial message's own size, so a full buffer always holds a whole
 * message). Returns 0 or
 * LAPSE_ENOMEM (the buffer is then as it was, its tail moved). REQUIRES:
 * the bytes left do not start a message rpc_frame_next refuses. */
int rpc_frame_keep_tail(uint8_t **in, size_t *inlen, size_t *incap, size_t used);

/* A connection's outgoing bytes on a non-blocking socket: b holds what is
 * still to write, from off. Appending (rpc_frame_append to b) and flushing
 * are the caller's, under its connection's lock. All zero is an empty one. */
typedef struct rpc_frame_out {
    buf b;
    size_t off;
} rpc_frame_out;

void rpc_frame_out_fini(rpc_frame_out *o);
/* Drops what is still to write. */
void rpc_frame_out_clear(rpc_frame_out *o);
/* Writes what o holds on fd, as much as the socket takes now (never
 * waits), and empties o once it is all written. Returns 0 (o may still
 * hold bytes: write again when fd is writable), or -1 when the socket
 * failed. */
int rpc_frame_out_flush(rpc_frame_out *o, int fd);
/* 1 while o holds bytes to write. */
static inline int rpc_frame_out_pending(const rpc_frame_out *o)
{
    return o->off < o->b.len;
}

/* A connection thread's wake-up: an eventfd (EFD_NONBLOCK) written to end
 * its poll, and drained by the thread once woken. */
void rpc_frame_wake(int efd);
void rpc_frame_wake_drain(int efd);

/* Splits url (tcp://host:port, tcp://[v6-address]:port; the host may be
 * empty) into host and port (digits, at most 65535). Returns 0,
 * NNG_ENOTSUP for another scheme, or NNG_EADDRINVAL. */
int rpc_frame_split_url(const char *url, char *host, size_t hostlen, char *port, size_t portlen);

#endif /* LAPSE_RPC_FRAME_H */
