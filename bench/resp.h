/*
 * resp.h: a minimal Redis client (RESP2 over TCP) for the TTL benchmark's
 * comparison with Redis: pipelined commands, and reading pushed messages of
 * a SUBSCRIBE connection. Not a general client.
 *
 * Thread-safety: one connection per thread.
 */
#ifndef LAPSE_BENCH_RESP_H
#define LAPSE_BENCH_RESP_H

#include <stddef.h>

typedef struct resp resp;

/* Connects to 127.0.0.1:port. NULL on failure. */
resp *resp_connect(int port);
void resp_close(resp *r);
/* Queues one command (argv of argc strings) without waiting. */
int resp_send(resp *r, int argc, const char *const *argv);
int resp_flush(resp *r);
/* Reads one reply and discards it; returns 0, or -1 on error/EOF or an
 * error reply (its text copied into err). */
int resp_read(resp *r, char *err, size_t errlen);
/* Reads one reply that is an array of bulk strings (a pushed pub/sub
 * message); copies element 2 (the payload) into out. Returns 0, 1 when
 * nothing arrived within timeout_ms, -1 on error. */
int resp_read_message(resp *r, int timeout_ms, char *out, size_t outlen);
/* Reads one integer reply into *out. */
int resp_read_int(resp *r, long long *out);

#endif
