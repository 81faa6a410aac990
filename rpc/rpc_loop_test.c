/*
 * rpc_loop_test.c: the loop (rpc_loop.h) on eventfds: a watched
 * descriptor's callback runs on the loop's thread while it is readable, one
 * at a time; after rpc_loop_del and rpc_loop_barrier it never runs again,
 * even for a descriptor kept readable; a callback in progress holds the
 * barrier until it returns. Every wait is bounded.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/clock.h"
#include "rpc_frame.h"
#include "rpc_loop.h"

typedef struct counted {
    rpc_loop *l;
    int fd;
    int drain;           /* reads the descriptor (else it stays readable) */
    int sleep_ms;        /* how long each call takes */
    atomic_int calls;    /* callbacks run */
    atomic_int off_loop; /* callbacks run on another thread than the loop's */
    atomic_int running;  /* callbacks running now */
    atomic_int overlap;  /* a callback began while another ran */
    rpc_loop_watch w;    /* on_ready with this */
} counted;

static void on_ready(void *arg)
{
    counted *k = arg;
    if (atomic_fetch_add(&k->running, 1) != 0) {
        atomic_fetch_add(&k->overlap, 1);
    }
    if (!rpc_loop_on_thread(k->l)) {
        atomic_fetch_add(&k->off_loop, 1);
    }
    if (k->drain) {
        rpc_frame_wake_drain(k->fd);
    }
    if (k->sleep_ms > 0) {
        clock_sleep_ms(k->sleep_ms);
    }
    atomic_fetch_add(&k->calls, 1);
    atomic_fetch_sub(&k->running, 1);
}

/* k (l, drain and sleep_ms set) watched on its loop with a new eventfd. */
static void counted_watch(counted *k)
{
    k->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(k->fd >= 0);
    k->w = (rpc_loop_watch){on_ready, k};
    assert_int_equal(rpc_loop_add(k->l, k->fd, &k->w), 0);
}

static void wait_calls(counted *k, int n)
{
    clock_mono until = clock_mono_after_ms(10000);
    while (atomic_load(&k->calls) < n) {
        assert_true(clock_mono_remaining_ms(until) > 0);
        clock_sleep_ms(1);
    }
}

static void callbacks_run_on_the_loop_thread(void **state)
{
    (void)state;
    rpc_loop *l = NULL;
    assert_int_equal(rpc_loop_open(&l, "test:loop"), 0);
    assert_false(rpc_loop_on_thread(l));
    counted a = {.l = l, .drain = 1}, b = {.l = l, .drain = 1};
    counted_watch(&a);
    counted_watch(&b);
    for (int i = 1; i <= 20; i++) {
        rpc_frame_wake(a.fd);
        rpc_frame_wake(b.fd);
        wait_calls(&a, i);
        wait_calls(&b, i);
    }
    rpc_loop_del(l, a.fd);
    rpc_loop_del(l, b.fd);
    rpc_loop_barrier(l);
    assert_int_equal(atomic_load(&a.off_loop) + atomic_load(&b.off_loop), 0);
    assert_int_equal(atomic_load(&a.overlap) + atomic_load(&b.overlap), 0);
    close(a.fd);
    close(b.fd);
    rpc_loop_close(l);
}

/* A descriptor left readable runs its callback again and again; once it is
 * removed and the barrier passed, never. */
static void no_callback_after_del_and_barrier(void **state)
{
    (void)state;
    rpc_loop *l = NULL;
    assert_int_equal(rpc_loop_open(&l, "test:loop"), 0);
    counted k = {.l = l, .drain = 0};
    counted_watch(&k);
    rpc_frame_wake(k.fd);
    wait_calls(&k, 50); /* level-triggered: it keeps coming */
    rpc_loop_del(l, k.fd);
    rpc_loop_barrier(l);
    int after = atomic_load(&k.calls);
    clock_sleep_ms(50);
    assert_int_equal(atomic_load(&k.calls), after);
    close(k.fd);
    rpc_loop_close(l);
}

/* The barrier waits for a callback that is running when it is asked. */
static void barrier_waits_for_the_running_callback(void **state)
{
    (void)state;
    rpc_loop *l = NULL;
    assert_int_equal(rpc_loop_open(&l, "test:loop"), 0);
    counted k = {.l = l, .drain = 1, .sleep_ms = 200};
    counted_watch(&k);
    rpc_frame_wake(k.fd);
    clock_mono until = clock_mono_after_ms(10000);
    while (atomic_load(&k.running) == 0) {
        assert_true(clock_mono_remaining_ms(until) > 0);
        clock_sleep_ms(1);
    }
    rpc_loop_del(l, k.fd);
    rpc_loop_barrier(l);
    assert_int_equal(atomic_load(&k.running), 0);
    assert_int_equal(atomic_load(&k.calls), 1);
    close(k.fd);
    rpc_loop_close(l);
    rpc_loop_close(NULL);
}

/* Watches the loop keeps: a callback runs on the loop's thread until
 * rpc_loop_unwatch_fd returns, never after; one left watched is freed by
 * the close (ASan's leak check would say otherwise). */
static void kept_watches(void **state)
{
    (void)state;
    rpc_loop *l = NULL;
    assert_int_equal(rpc_loop_open(&l, "test:loop"), 0);
    counted a = {.l = l, .drain = 0}, b = {.l = l, .drain = 1};
    a.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    b.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(a.fd >= 0 && b.fd >= 0);
    assert_int_equal(rpc_loop_watch_fd(l, a.fd, on_ready, &a), 0);
    assert_int_equal(rpc_loop_watch_fd(l, b.fd, on_ready, &b), 0);
    rpc_frame_wake(a.fd);
    rpc_frame_wake(b.fd);
    wait_calls(&a, 20); /* left readable: it keeps coming */
    wait_calls(&b, 1);
    rpc_loop_unwatch_fd(l, a.fd);
    int after = atomic_load(&a.calls);
    clock_sleep_ms(50);
    assert_int_equal(atomic_load(&a.calls), after);
    assert_int_equal(atomic_load(&a.off_loop) + atomic_load(&b.off_loop), 0);
    rpc_loop_unwatch_fd(l, a.fd); /* not watched any more: nothing */
    rpc_loop_close(l);            /* b still watched */
    close(a.fd);
    close(b.fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(callbacks_run_on_the_loop_thread),
        cmocka_unit_test(no_callback_after_del_and_barrier),
        cmocka_unit_test(barrier_waits_for_the_running_callback),
        cmocka_unit_test(kept_watches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
