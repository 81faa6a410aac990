/*
 * redis_peer.c: the benchmarks' Redis server and redis-benchmark runs
 * (redis_peer.h).
 */
#include "redis_peer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Runs argv with its stdout into out (outlen, NUL-terminated; the rest
 * dropped) and waits for it. Its exit status, or -1. */
static int run_capture(char *const argv[], char *out, size_t outlen)
{
    int fd[2];
    pid_t pid;
    posix_spawn_file_actions_t fa;
    if (pipe(fd) != 0) {
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    int rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    size_t n = 0;
    while (rv == 0) {
        char sink[4096]; /* what does not fit in out is read and dropped */
        int room = n + 1 < outlen;
        ssize_t k = read(fd[0], room ? out + n : sink, room ? outlen - 1 - n : sizeof(sink));
        if (k <= 0) {
            break;
        }
        n += room ? (size_t)k : 0;
    }
    close(fd[0]);
    out[n < outlen ? n : outlen - 1] = '\0';
    int status = -1;
    if (rv == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return -1;
}

void redis_print_version(void)
{
    char out[256] = "";
    char *argv[] = {"redis-server", "--version", NULL};
    (void)run_capture(argv, out, sizeof(out));
    out[strcspn(out, "\n")] = '\0';
    printf("# redis: %s\n", out[0] != '\0' ? out : "redis-server --version gave nothing");
    fflush(stdout);
}

pid_t redis_spawn(int port, const char *const *args)
{
    char p[16];
    snprintf(p, sizeof(p), "%d", port);
    const char *argv[64] = {"redis-server", "--port", p, "--bind", "127.0.0.1"};
    size_t n = 5;
    for (size_t i = 0; args != NULL && args[i] != NULL && n + 1 < 64; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY | O_CREAT, 0644);
    int rv = posix_spawnp(&pid, "redis-server", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rv == 0 ? pid : -1;
}

int redis_wait(int port, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0) {
            close(fd);
        }
        if (ok) {
            return 0;
        }
        usleep(20 * 1000);
    }
    return -1;
}

/* Parses redis-benchmark's --csv row of cmd ("SET","rps","avg","min",
 * "p50","p95","p99","max") from out. 0 or -1. */
static int parse_row(const char *out, const char *cmd, redis_rate *r)
{
    char head[16];
    snprintf(head, sizeof(head), "\"%s\",", cmd);
    for (const char *line = out; line != NULL && *line != '\0';) {
        if (strncmp(line, head, strlen(head)) == 0 &&
            sscanf(line + strlen(head), "\"%lf\",\"%*f\",\"%*f\",\"%lf\",\"%*f\",\"%lf\"", &r->rps,
                   &r->p50_ms, &r->p99_ms) == 3) {
            return 0;
        }
        line = strchr(line, '\n');
        line = line != NULL ? line + 1 : NULL;
    }
    return -1;
}

int redis_bench(int port, int clients, int value_bytes, long requests, long keyspace,
                redis_rate *set, redis_rate *get)
{
    char p[16], c[16], d[16], n[24], r[24];
    snprintf(p, sizeof(p), "%d", port);
    snprintf(c, sizeof(c), "%d", clients);
    snprintf(d, sizeof(d), "%d", value_bytes);
    snprintf(n, sizeof(n), "%ld", requests);
    snprintf(r, sizeof(r), "%ld", keyspace);
    char *argv[] = {
        "redis-benchmark", "-h",    "127.0.0.1", "-p", p, "-c", c, "-d", d, "-n", n, "-r", r, "-t",
        "set,get",         "--csv", NULL};
    char out[4096];
    if (run_capture(argv, out, sizeof(out)) != 0) {
        return -1;
    }
    return parse_row(out, "SET", set) == 0 && parse_row(out, "GET", get) == 0 ? 0 : -1;
}
