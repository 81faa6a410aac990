/*
 * resp.c: see resp.h.
 */
#include "resp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct resp {
    int fd;
    char *out; /* pending commands */
    size_t olen, ocap;
    char in[65536]; /* read buffer */
    size_t ipos, ilen;
};

resp *resp_connect(int port)
{
    resp *r = calloc(1, sizeof(*r));
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (r == NULL) {
        return NULL;
    }
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (r->fd < 0 || connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        resp_close(r);
        return NULL;
    }
    return r;
}

void resp_close(resp *r)
{
    if (r != NULL) {
        if (r->fd >= 0) {
            close(r->fd);
        }
        free(r->out);
        free(r);
    }
}

static int out_append(resp *r, const char *p, size_t n)
{
    if (r->olen + n > r->ocap) {
        size_t nc = r->ocap ? r->ocap * 2 : 65536;
        while (nc < r->olen + n) {
            nc *= 2;
        }
        char *q = realloc(r->out, nc);
        if (q == NULL) {
            return -1;
        }
        r->out = q;
        r->ocap = nc;
    }
    memcpy(r->out + r->olen, p, n);
    r->olen += n;
    return 0;
}

int resp_send(resp *r, int argc, const char *const *argv)
{
    char hdr[64];
    int n = snprintf(hdr, sizeof(hdr), "*%d\r\n", argc);
    if (out_append(r, hdr, (size_t)n) != 0) {
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]);
        n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", len);
        if (out_append(r, hdr, (size_t)n) != 0 || out_append(r, argv[i], len) != 0 ||
            out_append(r, "\r\n", 2) != 0) {
            return -1;
        }
    }
    return r->olen > (1 << 20) ? resp_flush(r) : 0;
}

int resp_flush(resp *r)
{
    size_t off = 0;
    while (off < r->olen) {
        ssize_t w = write(r->fd, r->out + off, r->olen - off);
        if (w <= 0) {
            return -1;
        }
        off += (size_t)w;
    }
    r->olen = 0;
    return 0;
}

/* Fills the read buffer; 0, 1 on timeout, -1 on EOF/error. */
static int fill(resp *r, int timeout_ms)
{
    if (r->ipos == r->ilen) {
        r->ipos = r->ilen = 0;
    }
    if (r->ilen == sizeof(r->in)) {
        memmove(r->in, r->in + r->ipos, r->ilen - r->ipos);
        r->ilen -= r->ipos;
        r->ipos = 0;
    }
    struct pollfd pfd = {r->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr == 0) {
        return 1;
    }
    if (pr < 0) {
        return -1;
    }
    ssize_t got = read(r->fd, r->in + r->ilen, sizeof(r->in) - r->ilen);
    if (got <= 0) {
        return -1;
    }
    r->ilen += (size_t)got;
    return 0;
}

/* Reads one line (without CRLF) into line. */
static int read_line(resp *r, char *line, size_t max, int timeout_ms)
{
    for (;;) {
        char *start = r->in + r->ipos;
        char *nl = memchr(start, '\n', r->ilen - r->ipos);
        if (nl != NULL) {
            size_t n = (size_t)(nl - start);
            if (n > 0 && start[n - 1] == '\r') {
                n--;
            }
            if (n >= max) {
                n = max - 1;
            }
            memcpy(line, start, n);
            line[n] = '\0';
            r->ipos = (size_t)(nl - r->in) + 1;
            return 0;
        }
        int rv = fill(r, timeout_ms);
        if (rv != 0) {
            return rv;
        }
    }
}

/* Reads n bytes plus CRLF into out (truncated to outlen-1, NUL-terminated). */
static int read_bulk(resp *r, long n, char *out, size_t outlen)
{
    size_t need = (size_t)n + 2, got = 0;
    while (got < need) {
        if (r->ipos == r->ilen && fill(r, 5000) != 0) {
            return -1;
        }
        size_t take = r->ilen - r->ipos;
        if (take > need - got) {
            take = need - got;
        }
        if (out != NULL && got < outlen - 1) {
            size_t c = take;
            if (got + c > outlen - 1) {
                c = outlen - 1 - got;
            }
            memcpy(out + got, r->in + r->ipos, c);
        }
        got += take;
        r->ipos += take;
    }
    if (out != NULL) {
        out[(size_t)n < outlen - 1 ? (size_t)n : outlen - 1] = '\0';
    }
    return 0;
}

static int skip_reply(resp *r, char *err, size_t errlen, int timeout_ms)
{
    char line[512];
    int rv = read_line(r, line, sizeof(line), timeout_ms);
    if (rv != 0) {
        return rv;
    }
    switch (line[0]) {
    case '+':
    case ':':
        return 0;
    case '-':
        if (err != NULL) {
            snprintf(err, errlen, "%s", line + 1);
        }
        return -1;
    case '$': {
        long n = atol(line + 1);
        return n < 0 ? 0 : read_bulk(r, n, NULL, 0);
    }
    case '*': {
        long n = atol(line + 1);
        for (long i = 0; i < n; i++) {
            if (skip_reply(r, err, errlen, 5000) != 0) {
                return -1;
            }
        }
        return 0;
    }
    default:
        return -1;
    }
}

int resp_read(resp *r, char *err, size_t errlen)
{
    return skip_reply(r, err, errlen, 10000) == 0 ? 0 : -1;
}

int resp_read_int(resp *r, long long *out)
{
    char line[128];
    if (read_line(r, line, sizeof(line), 10000) != 0 || line[0] != ':') {
        return -1;
    }
    *out = atoll(line + 1);
    return 0;
}

int resp_read_message(resp *r, int timeout_ms, char *out, size_t outlen)
{
    char line[128];
    int rv = read_line(r, line, sizeof(line), timeout_ms);
    if (rv != 0) {
        return rv;
    }
    if (line[0] != '*') {
        return -1;
    }
    long n = atol(line + 1);
    for (long i = 0; i < n; i++) {
        if (read_line(r, line, sizeof(line), 5000) != 0) {
            return -1;
        }
        if (line[0] == '$') {
            if (read_bulk(r, atol(line + 1), i == 2 ? out : NULL, outlen) != 0) {
                return -1;
            }
        } else if (line[0] != ':') {
            return -1;
        }
    }
    return 0;
}
