/* stopsig_test: a stop signal stays pending while blocked, in main and in a
 * thread started afterwards, and reaches the handler only when main waits
 * with the returned mask. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "stopsig.h"

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    g_stop = sig;
}

static void *thread_mask(void *arg)
{
    sigset_t *cur = arg;
    pthread_sigmask(SIG_BLOCK, NULL, cur);
    return NULL;
}

static void blocked_until_waited_for(void **state)
{
    (void)state;
    sigset_t waitset, cur, pending;
    stopsig_block(on_stop, &waitset);
    assert_false(sigismember(&waitset, SIGTERM));
    assert_false(sigismember(&waitset, SIGINT));

    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, thread_mask, &cur), 0);
    pthread_join(th, NULL);
    assert_true(sigismember(&cur, SIGTERM));
    assert_true(sigismember(&cur, SIGINT));

    raise(SIGTERM); /* to this thread: stays pending, blocked */
    assert_int_equal(g_stop, 0);
    sigpending(&pending);
    assert_true(sigismember(&pending, SIGTERM));
    while (!g_stop) {
        sigsuspend(&waitset);
    }
    assert_int_equal(g_stop, SIGTERM);

    struct sigaction sa;
    sigaction(SIGPIPE, NULL, &sa);
    assert_true(sa.sa_handler == SIG_IGN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocked_until_waited_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
