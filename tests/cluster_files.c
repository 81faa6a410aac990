/*
 * cluster_files.c: what a test reads of the cluster's processes (their
 * logs and data dirs) and the lapse CLI it runs against the cluster
 * (cluster.h).
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster_int.h"

extern char **environ;

const char *cluster_log_path(const cluster *c, int idx)
{
    return (idx >= 0 && idx < c->nprocs) ? c->procs[idx].log_path : NULL;
}

int cluster_log_contains(const cluster *c, int idx, const char *needle)
{
    const char *path = cluster_log_path(c, idx);
    char *log = path != NULL ? cluster_read_file(path) : NULL;
    int found = log != NULL && strstr(log, needle) != NULL;
    free(log);
    return found;
}

void cluster_print_log_tail(const cluster *c, int idx, int lines)
{
    const char *path = cluster_log_path(c, idx);
    char *log = path != NULL ? cluster_read_file(path) : NULL;
    if (log == NULL) {
        fprintf(stderr, "--- no log for process %d\n", idx);
        return;
    }
    const char *from = log + strlen(log);
    int n = 0;
    while (from > log && !(from[-1] == '\n' && n++ == lines)) {
        from--; /* stops just after the newline before the lines wanted */
    }
    fprintf(stderr, "--- the last %d lines of %s\n%s--- end of %s\n", lines, path, from, path);
    free(log);
}

const char *cluster_data_dir(const cluster *c, int idx)
{
    return (idx >= 0 && idx < c->nprocs) ? c->procs[idx].data_dir : NULL;
}

pid_t cluster_cli_spawn(const cluster *c, const char *const *args, const char *out_path,
                        const char *err_path)
{
    return cluster_cli_spawn_in(c, args, NULL, out_path, err_path);
}

int cluster_cli_run(const cluster *c, const char *const *args, const char *in_path, char **out,
                    char **err)
{
    char outp[700], errp[700];
    snprintf(outp, sizeof(outp), "%s/cli.out", c->run_dir);
    snprintf(errp, sizeof(errp), "%s/cli.err", c->run_dir);
    pid_t pid = cluster_cli_spawn_in(c, args, in_path, outp, errp);
    int st = 0;
    int ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st);
    *out = cluster_read_file(outp);
    *err = cluster_read_file(errp);
    return ok ? WEXITSTATUS(st) : -1;
}

pid_t cluster_cli_spawn_in(const cluster *c, const char *const *args, const char *in_path,
                           const char *out_path, const char *err_path)
{
    char bin[700];
    snprintf(bin, sizeof(bin), "%s/lapse", c->bin_dir);
    const char *argv[32];
    int argc = 0;
    argv[argc++] = bin;
    argv[argc++] = "--coordinator";
    argv[argc++] = c->coord_urls;
    for (int i = 0; args[i] != NULL && argc < 31; i++) {
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in_path != NULL ? in_path : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rv = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rv == 0 ? pid : -1;
}
