/*
 * scrape.c: see scrape.h.
 */
#include "scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

char *scrape_get(const char *addr, int timeout_ms)
{
    char host[64];
    int port = 0;
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= sizeof(host)) {
        return NULL;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    port = atoi(colon + 1);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        return NULL;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return NULL;
    }
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    char *out = NULL;
    size_t len = 0, cap = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        goto fail;
    }
    char req[160];
    int n = snprintf(req, sizeof(req),
                     "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr);
    if (write(fd, req, (size_t)n) != n) {
        goto fail;
    }
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *p = realloc(out, cap);
            if (p == NULL) {
                goto fail;
            }
            out = p;
        }
        ssize_t got = read(fd, out + len, cap - len - 1);
        if (got < 0) {
            goto fail;
        }
        if (got == 0) {
            break;
        }
        len += (size_t)got;
    }
    close(fd);
    if (out == NULL) {
        return NULL;
    }
    out[len] = '\0';
    char *body = strstr(out, "\r\n\r\n");
    if (strncmp(out, "HTTP/1.1 200", 12) != 0 || body == NULL) {
        free(out);
        return NULL;
    }
    /* A chunked body is not expected from NNG's server for a copied body. */
    memmove(out, body + 4, len - (size_t)(body + 4 - out) + 1);
    return out;
fail:
    close(fd);
    free(out);
    return NULL;
}

/* Whether the label text between braces holds every pair of want. */
static int labels_match(const char *have, size_t hlen, const char *want)
{
    if (want == NULL || *want == '\0') {
        return 1;
    }
    char pair[256];
    const char *p = want;
    while (*p != '\0') {
        const char *end = strstr(p, "\",");
        size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        if (n >= sizeof(pair)) {
            return 0;
        }
        memcpy(pair, p, n);
        pair[n] = '\0';
        int found = 0;
        for (const char *h = have; h + n <= have + hlen; h++) {
            if (strncmp(h, pair, n) == 0 && (h == have || h[-1] == ',' || h[-1] == '{')) {
                found = 1;
                break;
            }
        }
        if (!found) {
            return 0;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return 1;
}

double scrape_sum(const char *text, const char *name, const char *labels)
{
    double sum = 0;
    size_t nlen = strlen(name);
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t llen = eol ? (size_t)(eol - line) : strlen(line);
        if (line[0] != '#' && llen > nlen && strncmp(line, name, nlen) == 0 &&
            (line[nlen] == ' ' || line[nlen] == '{')) {
            const char *val;
            int ok = 1;
            if (line[nlen] == '{') {
                const char *close = memchr(line, '}', llen);
                ok = close != NULL &&
                     labels_match(line + nlen + 1, (size_t)(close - line - nlen - 1), labels);
                val = close ? close + 1 : line + llen;
            } else {
                ok = labels == NULL || *labels == '\0';
                val = line + nlen;
            }
            if (ok) {
                sum += strtod(val, NULL);
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return sum;
}
