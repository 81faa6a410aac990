/*
 * token.h: shared secrets read from files and compared without timing
 * leaks: the coordinator's admin token and the nodes' cluster token.
 *
 * Thread-safety: both functions are pure (token_read_file touches only its
 * arguments and the file).
 */
#ifndef LAPSE_TOKEN_H
#define LAPSE_TOKEN_H

#include <stddef.h>

/* Reads the token in path into tok (cap bytes, NUL-terminated): the file's
 * text without one final newline. what names it in messages ("admin token").
 * Returns 0, or -1 with a reason in err: the file cannot be read, is empty,
 * holds a NUL byte, or its token (without that newline) is cap bytes or
 * longer. */
int token_read_file(const char *path, const char *what, char *tok, size_t cap, char *err,
                    size_t errlen);

/* 1 when got (NUL-terminated; NULL counts as "") equals want (want_len
 * bytes), comparing every byte of want whatever the outcome, so the time
 * taken does not tell how many leading bytes of a guess were right. */
int token_equal(const char *want, size_t want_len, const char *got);

#endif
