/*
 * rpc_probe.c: whether anything listens at a peer's address (rpc_probe,
 * contract in rpc.h): one plain TCP connect, bounded by a poll, outside
 * NNG (whose dialer retries in the background and does not say why a dial
 * failed). Only a refusal is proof of anything: a reset of a SYN, which
 * the peer's kernel sends when no socket listens on the port. A timeout or
 * an unreachable network says nothing about the process (a cut, a stopped
 * process, a full backlog).
 */
#include "rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>

/* The outcome of one connect to addr, waiting up to timeout_ms. */
static rpc_probe_result connect_once(const struct addrinfo *ai, int timeout_ms)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        return RPC_PROBE_UNKNOWN;
    }
    rpc_probe_result out = RPC_PROBE_UNKNOWN;
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        out = RPC_PROBE_LISTENING;
    } else if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        socklen_t len = sizeof(err);
        if (poll(&p, 1, timeout_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0) {
            out = err == 0              ? RPC_PROBE_LISTENING
                  : err == ECONNREFUSED ? RPC_PROBE_REFUSED
                                        : RPC_PROBE_UNKNOWN;
        }
    } else if (errno == ECONNREFUSED) {
        out = RPC_PROBE_REFUSED;
    }
    close(fd);
    return out;
}

rpc_probe_result rpc_probe(const char *url, int timeout_ms)
{
    nng_url *u = NULL;
    if (nng_url_parse(&u, url) != 0) {
        return RPC_PROBE_UNKNOWN;
    }
    rpc_probe_result out = RPC_PROBE_UNKNOWN;
    if (strcmp(u->u_scheme, "tcp") == 0 && u->u_hostname[0] != '\0' && u->u_port[0] != '\0') {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG};
        struct addrinfo *res = NULL;
        if (getaddrinfo(u->u_hostname, u->u_port, &hints, &res) == 0 && res != NULL) {
            /* The first address only: the one a dialer tries first. */
            out = connect_once(res, timeout_ms);
            freeaddrinfo(res);
        }
    }
    nng_url_free(u);
    return out;
}
