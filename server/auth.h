/* auth.h — optional bearer-token authentication. The token comes from a file (first line, trailing
 * whitespace removed); requests compare in time independent of where they differ.
 * Thread-safety: an auth is immutable after auth_load(); swap whole objects to change tokens. */
#ifndef SRV_AUTH_H
#define SRV_AUTH_H

#include <stddef.h>

typedef struct auth auth;

/* Reads the token from path. Rejects an empty token, one longer than 4096 bytes or with control
 * characters, and a file other users may read (warned, not rejected: *warn is set). */
int auth_load(const char *path, auth **out, int *world_readable, char *err, size_t errlen);
void auth_free(auth *a);
/* 1 when the Authorization header value is "Bearer <token>" with the right token. */
int auth_check(const auth *a, const char *authorization_header);

#endif
