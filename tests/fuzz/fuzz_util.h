/* fuzz_util.h — what every fuzz target shares: the property checks that turn a wrong answer (not
 * only a crash) into a finding libFuzzer records. */
#ifndef RNNTD_FUZZ_UTIL_H
#define RNNTD_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken property is a crash: libFuzzer saves the input and stops. */
#define FUZZ_CHECK(cond, ...)                                                                        \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            abort();                                                                                 \
        }                                                                                            \
    } while (0)

/* A rejection must say why: a non-empty message inside its buffer. */
static inline void fuzz_check_message(const char *msg, size_t cap)
{
    FUZZ_CHECK(memchr(msg, '\0', cap) != NULL, "error message not terminated");
    FUZZ_CHECK(msg[0] != '\0', "rejected without a message");
}

/* A NUL-terminated copy of data (the parsers that take C strings). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
