/* auth.c — bearer tokens. */
#include "auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define AUTH_MAX_TOKEN 4096

struct auth {
    size_t len;
    char token[];
};

int auth_load(const char *path, auth **out, int *world_readable, char *err, size_t errlen)
{
    *out = NULL;
    if (world_readable) *world_readable = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the token file: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH)) && world_readable)
        *world_readable = 1;
    char buf[AUTH_MAX_TOKEN + 2];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) *nl = '\0';
    else if (n > AUTH_MAX_TOKEN) {
        snprintf(err, errlen, "%s: the token is longer than %d bytes", path, AUTH_MAX_TOKEN);
        return -1;
    }
    size_t len = strlen(buf);
    if (len != (nl ? (size_t)(nl - buf) : n)) {
        snprintf(err, errlen, "%s: NUL byte in the token", path);
        return -1;
    }
    while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t' || buf[len - 1] == '\r')) buf[--len] = '\0';
    if (len == 0) {
        snprintf(err, errlen, "%s: the token file is empty", path);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] == 0x7f) {
            snprintf(err, errlen, "%s: the token holds a space or control character", path);
            return -1;
        }
    auth *a = malloc(sizeof *a + len + 1);
    if (!a) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    a->len = len;
    memcpy(a->token, buf, len + 1);
    *out = a;
    return 0;
}

void auth_free(auth *a) { free(a); }

int auth_check(const auth *a, const char *h)
{
    if (!a) return 1;
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return 0;
    const char *given = h + 7;
    while (*given == ' ') given++;
    size_t glen = strlen(given);
    while (glen && given[glen - 1] == ' ') glen--;
    /* Touch every byte of the expected token whatever the input; only the length of the client's
     * own string influences the time taken. */
    volatile unsigned char diff = (unsigned char)(glen != a->len);
    for (size_t i = 0; i < a->len; i++) {
        unsigned char g = i < glen ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)a->token[i]);
    }
    return diff == 0;
}
