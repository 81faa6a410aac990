/*
 * cluster_host.c: what a test cluster takes from the host, no cluster
 * needed (cluster.h): free loopback ports, a run directory and its
 * removal, a whole file read back.
 */
#include <errno.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/lapse_err.h"
#include "cluster.h"
#include "freeport.h"

extern char **environ;

int cluster_free_port(void)
{
    return freeport_loopback();
}

int cluster_mkdtemp(char *out, size_t outlen, const char *prefix, char *err, size_t errlen)
{
    const char *tmp = getenv("LAPSE_TEST_TMP");
    if (tmp == NULL || *tmp == '\0') {
        tmp = "/tmp";
    }
    mkdir(tmp, 0755);
    snprintf(out, outlen, "%s/%s-XXXXXX", tmp, prefix);
    if (mkdtemp(out) == NULL) {
        snprintf(err, errlen, "mkdtemp %s: %s", out, strerror(errno));
        return LAPSE_EIO;
    }
    return 0;
}

void cluster_rm_rf(const char *dir)
{
    if (dir == NULL || dir[0] == '\0') {
        return;
    }
    char *argv[] = {"rm", "-rf", (char *)dir, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0) {
        waitpid(pid, NULL, 0);
    }
}

int cluster_free_port_except(const int *taken, size_t n)
{
    for (int tries = 0; tries < 100; tries++) {
        int port = cluster_free_port();
        size_t i = 0;
        while (i < n && taken[i] != port) {
            i++;
        }
        if (port != 0 && i == n) {
            return port;
        }
    }
    return 0;
}

char *cluster_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (f != NULL && buf != NULL) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) {
            break;
        }
        char *more = realloc(buf, cap * 2);
        if (more == NULL) {
            break;
        }
        buf = more;
        cap *= 2;
    }
    if (f != NULL) {
        fclose(f);
    }
    if (buf != NULL) {
        buf[n] = '\0';
    }
    return buf != NULL ? buf : strdup("");
}
