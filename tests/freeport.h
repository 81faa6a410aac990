/*
 * freeport.h: a loopback TCP port nobody listens on right now, for the
 * daemons and servers a test starts. Shared by every test fixture (the
 * cluster harness, the coordinator's and the RPC layer's tests), so it
 * depends on nothing of Lapse.
 *
 * Thread-safety: any thread. The port may be taken by someone else before
 * the caller binds it; the fixtures treat a failed bind as a test failure.
 */
#ifndef LAPSE_TEST_FREEPORT_H
#define LAPSE_TEST_FREEPORT_H

/* The port the kernel handed a socket bound to 127.0.0.1:0, or 0 when it
 * could not. */
int freeport_loopback(void);

#endif
