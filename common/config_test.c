/* config_test: config files become "--key=value" flags ahead of the command
 * line, so the command line wins; every bad file is refused with FILE:LINE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "lapse_err.h"

static const struct option opts[] = {
    {"listen", required_argument, NULL, 'l'},
    {"data", required_argument, NULL, 'd'},
    {"workers", required_argument, NULL, 'w'},
    {"debug-clock-offset-ms", required_argument, NULL, 'O'},
    {"naive", no_argument, NULL, 'n'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Writes text to a fresh temporary file; the caller unlinks *path. */
static void write_file(char *path, size_t len, const char *text)
{
    const char *dir = getenv("LAPSE_TEST_TMP");
    if (dir == NULL || access(dir, W_OK) != 0) {
        dir = "/tmp";
    }
    snprintf(path, len, "%s/config_test.XXXXXX", dir);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* Runs config_argv_init on a file holding text and `extra` command-line
 * arguments after "--config FILE". Returns its code; err gets the message. */
static int init_with(config_argv *ca, const char *text, char *err, size_t errlen, char *path,
                     size_t pathlen)
{
    write_file(path, pathlen, text);
    char *argv[] = {"prog", "--config", path, NULL};
    return config_argv_init(ca, 3, argv, opts, err, errlen);
}

/* The values getopt_long ends with. */
typedef struct parsed {
    const char *listen, *data, *workers;
    int naive;                /* --naive seen */
    const char *listen_where; /* config_argv_where of --listen's value */
    char where_buf[512];
} parsed;

static int parse(config_argv *ca, parsed *p)
{
    memset(p, 0, sizeof(*p));
    optind = 0; /* full reset between runs (glibc) */
    opterr = 0;
    int c;
    while ((c = getopt_long(ca->argc, ca->argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            p->listen = optarg;
            p->listen_where = config_argv_where(ca, optarg, p->where_buf, sizeof(p->where_buf));
            break;
        case 'd':
            p->data = optarg;
            break;
        case 'w':
            p->workers = optarg;
            break;
        case 'O':
            break;
        case 'n':
            p->naive = 1;
            break;
        default:
            return -1;
        }
    }
    return optind == ca->argc ? 0 : -1;
}

static void no_config_keeps_argv(void **state)
{
    (void)state;
    char *argv[] = {"prog", "--listen", "tcp://a:1", "--data=/d", NULL};
    config_argv ca;
    char err[256];
    assert_int_equal(config_argv_init(&ca, 4, argv, opts, err, sizeof(err)), 0);
    assert_int_equal(ca.argc, 4);
    assert_null(ca.path);
    assert_int_equal(ca.nsettings, 0);
    for (int i = 0; i < 4; i++) {
        assert_ptr_equal(ca.argv[i], argv[i]);
    }
    assert_null(ca.argv[4]);
    parsed p;
    assert_int_equal(parse(&ca, &p), 0);
    assert_string_equal(p.listen, "tcp://a:1");
    assert_null(p.listen_where);
    config_argv_fini(&ca);
    config_argv_fini(&ca); /* twice is harmless */
    config_argv_fini(NULL);
}

static void file_settings_then_command_line(void **state)
{
    (void)state;
    char path[512], err[512];
    write_file(path, sizeof(path),
               "# a comment\n"
               "\n"
               "   listen   =   tcp://10.0.0.1:7401   \n"
               "data=/var/lib/lapse/node1 # trailing comment\n"
               "\tworkers\t=\t8\r\n"
               "debug-clock-offset-ms = -5\n");
    char *argv[] = {"prog", "--workers", "2", "--config", path, "--data=/cmdline", NULL};
    config_argv ca;
    assert_int_equal(config_argv_init(&ca, 6, argv, opts, err, sizeof(err)), 0);
    assert_string_equal(ca.path, path);
    assert_int_equal(ca.nsettings, 4);
    /* argv[0], the file in order, then the command line without --config */
    const char *want[] = {"prog",
                          "--listen=tcp://10.0.0.1:7401",
                          "--data=/var/lib/lapse/node1",
                          "--workers=8",
                          "--debug-clock-offset-ms=-5",
                          "--workers",
                          "2",
                          "--data=/cmdline"};
    assert_int_equal(ca.argc, 8);
    for (int i = 0; i < 8; i++) {
        assert_string_equal(ca.argv[i], want[i]);
    }
    assert_null(ca.argv[8]);
    assert_int_equal(ca.lines[0], 3);
    assert_int_equal(ca.lines[3], 6);

    parsed p;
    assert_int_equal(parse(&ca, &p), 0);
    assert_string_equal(p.listen, "tcp://10.0.0.1:7401"); /* only in the file */
    assert_string_equal(p.data, "/cmdline");              /* the command line wins */
    assert_string_equal(p.workers, "2");
    char want_where[600];
    snprintf(want_where, sizeof(want_where), "%s:3", path);
    assert_non_null(p.listen_where);
    assert_string_equal(p.listen_where, want_where);
    config_argv_fini(&ca);
    unlink(path);
}

static void config_equals_form_and_double_dash(void **state)
{
    (void)state;
    char path[512], err[512], flag[600];
    write_file(path, sizeof(path), "listen = tcp://x:1\nworkers = a=b#c\n");
    snprintf(flag, sizeof(flag), "--config=%s", path);
    /* After "--" nothing is a --config. */
    char *argv[] = {"prog", flag, "--", "--config", "other", NULL};
    config_argv ca;
    assert_int_equal(config_argv_init(&ca, 5, argv, opts, err, sizeof(err)), 0);
    assert_int_equal(ca.argc, 6);
    assert_string_equal(ca.argv[1], "--listen=tcp://x:1");
    assert_string_equal(ca.argv[2], "--workers=a=b#c"); /* '#' inside a word is kept */
    assert_string_equal(ca.argv[3], "--");
    assert_string_equal(ca.argv[4], "--config");
    assert_string_equal(ca.argv[5], "other");
    char buf[8];
    assert_null(config_argv_where(&ca, "elsewhere", buf, sizeof(buf)));
    assert_null(config_argv_where(&ca, NULL, buf, sizeof(buf)));
    config_argv_fini(&ca);
    unlink(path);
}

static void switches_are_true_or_false(void **state)
{
    (void)state;
    char path[512], err[512];
    config_argv ca;
    parsed p;
    assert_int_equal(init_with(&ca, "naive = true\n", err, sizeof(err), path, sizeof(path)), 0);
    assert_int_equal(ca.argc, 2);
    assert_string_equal(ca.argv[1], "--naive");
    assert_int_equal(parse(&ca, &p), 0);
    assert_true(p.naive);
    config_argv_fini(&ca);
    unlink(path);

    /* false adds nothing, but still counts as set */
    assert_int_equal(
        init_with(&ca, "naive = false\nworkers = 3\n", err, sizeof(err), path, sizeof(path)), 0);
    assert_int_equal(ca.argc, 2);
    assert_string_equal(ca.argv[1], "--workers=3");
    assert_int_equal(ca.lines[0], 2);
    assert_int_equal(parse(&ca, &p), 0);
    assert_false(p.naive);
    config_argv_fini(&ca);
    unlink(path);
}

static void empty_file_is_fine(void **state)
{
    (void)state;
    char path[512], err[512];
    config_argv ca;
    assert_int_equal(init_with(&ca, "# nothing set\n\n   \n", err, sizeof(err), path, sizeof(path)),
                     0);
    assert_int_equal(ca.nsettings, 0);
    assert_int_equal(ca.argc, 1);
    config_argv_fini(&ca);
    unlink(path);
}

/* Each bad file fails with LAPSE_EUSAGE and "FILE:LINE: <want>". */
static void bad_files_name_file_and_line(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int line;
        const char *want;
    } cases[] = {
        {"listen = x\nnonsense\n", 2, "expected 'key = value', not 'nonsense'"},
        {"= value\n", 1, "expected 'key = value', the key is missing"},
        {"# ok\nlisten = x\nport = 7\n", 3,
         "unknown key 'port' (known: listen, data, workers, naive)"},
        {"--listen = x\n", 1, "write the key without its dashes ('listen' not '--listen')"},
        {"help = true\n", 1, "'help' cannot be set in a config file"},
        {"naive = yes\n", 1, "'naive' is true or false, not 'yes'"},
        {"naive = false\nnaive = true\n", 2, "'naive' is already set at line 1"},
        {"config = /etc/x\n", 1, "a config file cannot name another one"},
        {"data =   # nothing\n", 1, "'data' has no value"},
        {"data = /a\n\ndata = /b\n", 3, "'data' is already set at line 1"},
        {"log level = info\n", 1, "unknown key 'log level'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[512], err[1024], want[1200];
        config_argv ca;
        int rv = init_with(&ca, cases[i].text, err, sizeof(err), path, sizeof(path));
        if (rv != LAPSE_EUSAGE) {
            fail_msg("case %zu: rv %d (%s)", i, rv, err);
        }
        snprintf(want, sizeof(want), "%s:%d: %s", path, cases[i].line, cases[i].want);
        if (strncmp(err, want, strlen(want)) != 0) {
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, want);
        }
        assert_null(ca.argv);
        assert_int_equal(ca.nsettings, 0);
        config_argv_fini(&ca);
        unlink(path);
    }
}

static void nul_byte_is_refused(void **state)
{
    (void)state;
    char path[512], err[1024];
    write_file(path, sizeof(path), "listen = x\n");
    FILE *fp = fopen(path, "a");
    assert_non_null(fp);
    fwrite("data = a\0b\n", 1, 11, fp);
    fclose(fp);
    char *argv[] = {"prog", "--config", path, NULL};
    config_argv ca;
    assert_int_equal(config_argv_init(&ca, 3, argv, opts, err, sizeof(err)), LAPSE_EUSAGE);
    assert_non_null(strstr(err, ":2: the line holds a NUL byte"));
    config_argv_fini(&ca);
    unlink(path);
}

static void missing_or_unreadable_file(void **state)
{
    (void)state;
    char err[1024];
    config_argv ca;
    char *argv[] = {"prog", "--config", "/nonexistent/lapse.conf", NULL};
    assert_int_equal(config_argv_init(&ca, 3, argv, opts, err, sizeof(err)), LAPSE_EIO);
    assert_string_equal(err, "/nonexistent/lapse.conf: cannot open config file: No such file or "
                             "directory");
    config_argv_fini(&ca);

    char *dir_argv[] = {"prog", "--config", "/", NULL};
    assert_int_equal(config_argv_init(&ca, 3, dir_argv, opts, err, sizeof(err)), LAPSE_EIO);
    assert_non_null(strstr(err, "/: cannot read config file"));
    config_argv_fini(&ca);
}

static void bad_config_flag(void **state)
{
    (void)state;
    char err[256];
    config_argv ca;
    char *a1[] = {"prog", "--listen", "x", "--config", NULL};
    assert_int_equal(config_argv_init(&ca, 4, a1, opts, err, sizeof(err)), LAPSE_EUSAGE);
    assert_string_equal(err, "--config needs a value (a file)");
    char *a2[] = {"prog", "--config=", NULL};
    assert_int_equal(config_argv_init(&ca, 2, a2, opts, err, sizeof(err)), LAPSE_EUSAGE);
    assert_string_equal(err, "--config needs a value (a file)");
    char *a3[] = {"prog", "--config", "/a", "--config=/b", NULL};
    assert_int_equal(config_argv_init(&ca, 4, a3, opts, err, sizeof(err)), LAPSE_EUSAGE);
    assert_string_equal(err, "--config is given twice");
    /* No buffer for the message is allowed. */
    assert_int_equal(config_argv_init(&ca, 4, a3, opts, NULL, 0), LAPSE_EUSAGE);
    config_argv_fini(&ca);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_config_keeps_argv),
        cmocka_unit_test(file_settings_then_command_line),
        cmocka_unit_test(config_equals_form_and_double_dash),
        cmocka_unit_test(switches_are_true_or_false),
        cmocka_unit_test(empty_file_is_fine),
        cmocka_unit_test(bad_files_name_file_and_line),
        cmocka_unit_test(nul_byte_is_refused),
        cmocka_unit_test(missing_or_unreadable_file),
        cmocka_unit_test(bad_config_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
